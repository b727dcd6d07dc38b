#!/bin/bash
# test_install.sh — `make install` gives a working Python package: installed
# under a scratch PREFIX, `import weft` from elsewhere loads the installed
# libweft (through the _install.py make install wrote, not the build tree)
# and runs a one-rank allreduce; weft.torch imports when the extension was
# built. Exit: 0 pass, 1 fail, 77 skipped (Debian's python3 or numpy missing).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
BUILD=${WEFT_BUILD:-build}
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy not found"; exit 77; }
PREFIX=$(mktemp -d /tmp/weft-install.XXXXXX)
trap 'rm -rf "$PREFIX"' EXIT
make -s -C "$REPO" BUILD="$BUILD" PREFIX="$PREFIX" install >"$PREFIX.log" 2>&1 ||
	{ cat "$PREFIX.log"; rm -f "$PREFIX.log"; echo "FAIL: make install"; exit 1; }
rm -f "$PREFIX.log"
SITE=$(echo "$PREFIX"/lib/python3.*/dist-packages)
[ -f "$SITE/weft/_install.py" ] || { echo "FAIL: no weft package under $PREFIX"; exit 1; }
want_torch=0
ls "$REPO"/python/weft/_torch_ext*.so >/dev/null 2>&1 && want_torch=1
cd / && env -u WEFT_BUILD -u WEFT_LIBRARY PYTHONPATH="$SITE" WEFT_SOCKET_IFNAME=lo \
	"$PY" - "$PREFIX" "$want_torch" <<'PYEOF'
import os, sys
import numpy as np
import weft
from weft import _lib
prefix, want_torch = sys.argv[1], sys.argv[2] == "1"
loaded = os.path.realpath(_lib.lib._name)
assert loaded.startswith(os.path.realpath(prefix)), f"loaded {loaded}, not the installed copy"
assert weft.__file__.startswith(prefix), weft.__file__
with weft.Comm(1, weft.get_unique_id(), 0) as c:
    x = np.arange(6, dtype=np.float32)
    c.allreduce(x, op="max")
    assert x.tolist() == [0, 1, 2, 3, 4, 5], x
if want_torch:
    import weft.torch
    assert weft.torch.ProcessGroupWeft
print(f"PASS: installed package loads {loaded}" + (" and weft.torch" if want_torch else ""))
PYEOF
