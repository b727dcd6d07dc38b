#!/bin/bash
# test_pip.sh — the Python package as pip builds it (python/pyproject.toml,
# python/setup.py), in a venv over Debian's site-packages (numpy, torch),
# against a libweft installed elsewhere (make install-lib) and found with
# pkg-config:
#   (a) pip wheel --no-build-isolation builds a wheel of VERSION, with the
#       torch extension where Debian's torch and its headers are (then
#       WEFT_TORCH_EXT=1: a missing piece fails the build), pure Python
#       where they are not;
#   (b) pip install --no-build-isolation ./python installs it into the venv;
#   (c) from outside the tree: python -m weft --version and info name the
#       package's version and the installed libweft; a one-rank allreduce;
#       with the extension, weft.torch from the venv runs a 2-rank
#       torch.distributed all_reduce with the backend "weft";
#   (d) pip uninstall removes it.
# The build runs in a copy of python/ kept in BUILD/pip-src, so the tree
# stays clean and the extension's objects are reused when its sources did
# not change. Exit: 0 pass, 1 fail, 77 skipped (no pip, venv or numpy for
# Debian's python3).
set -u -o pipefail
. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
weft_test_python
"$PY" -c 'import setuptools, numpy, venv' 2>/dev/null && "$PY" -c 'import pip' 2>/dev/null ||
	{ echo "SKIP: $PY lacks numpy, pip, setuptools or venv (scripts/install-deps.sh)"; exit 77; }
weft_test_scratch pip
VERSION=$(cat "$REPO/VERSION")
P=$OUT/prefix
export WEFT_SOCKET_IFNAME=lo PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset WEFT_BUILD WEFT_LIBRARY PYTHONPATH

make -s -C "$REPO" BUILD="$BUILD" PREFIX="$P" install-lib >"$OUT/make.log" 2>&1 ||
	{ cat "$OUT/make.log"; echo "FAIL: make install-lib"; exit 1; }
export PKG_CONFIG_PATH=$P/lib/pkgconfig

torch=0
if "$PY" -c 'import torch' 2>/dev/null && [ -f /usr/include/pybind11/pybind11.h ] &&
	[ -f /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp ]; then
	torch=1
fi
export WEFT_TORCH_EXT=$torch

SRC=$BUILD/pip-src
mkdir -p "$SRC/python"
rm -rf "$SRC/python/weft" "$SRC/python/csrc" "$SRC/python"/*.egg-info
cp -a "$REPO/VERSION" "$SRC/"
(cd "$REPO/python" && git ls-files -z --cached --others --exclude-standard . 2>/dev/null | tar --null -T - -cf -) | tar -xf - -C "$SRC/python" ||
	cp -a "$REPO/python/." "$SRC/python/"

"$PY" -m venv --system-site-packages --without-pip "$OUT/venv" || { echo "FAIL: python3 -m venv"; exit 1; }
V=$OUT/venv/bin/python
pip() { "$V" -m pip --no-cache-dir "$@"; }

# (a) the wheel.
t0=$SECONDS
if pip wheel --no-build-isolation --no-index --no-deps -w "$OUT/wheels" "$SRC/python" >"$OUT/wheel.log" 2>&1; then
	wheel=$(cd "$OUT/wheels" && ls weft-*.whl)
	case $torch:$wheel in
	1:weft-"$VERSION"-cp3*-linux_*.whl | 0:weft-"$VERSION"-py3-none-any.whl) ok "pip wheel: $wheel ($((SECONDS - t0)) s)" ;;
	*) fail "pip wheel made $wheel (torch extension expected: $torch)" ;;
	esac
	"$PY" -m zipfile -l "$OUT/wheels/$wheel" >"$OUT/wheel.list"
	for f in weft/__main__.py weft/_version.py weft/_install.py; do
		grep -q "$f" "$OUT/wheel.list" || fail "the wheel lacks $f"
	done
	[ $torch = 0 ] || grep -q 'weft/_torch_ext' "$OUT/wheel.list" || fail "the wheel lacks the extension"
else
	fail "pip wheel: $(tail -30 "$OUT/wheel.log")"
fi

# (b) pip install ./python, as docs/install.md says.
if pip install --no-build-isolation --no-index "$SRC/python" >"$OUT/install.log" 2>&1; then
	ok "pip install --no-build-isolation ./python"
else
	fail "pip install: $(tail -30 "$OUT/install.log")"
	weft_test_end pip
fi

# (c) the installed package, from outside the tree.
cd "$OUT"
line=$("$V" -m weft --version 2>&1)
case $line in
"weft $VERSION (libweft $VERSION, $P/lib/libweft.so.$VERSION)") ok "python -m weft --version: $line" ;;
*) fail "python -m weft --version: '$line' (want weft $VERSION and $P's libweft)" ;;
esac
"$V" -m weft info >"$OUT/info.out" 2>&1 && grep -q "^package  weft $VERSION at $OUT/venv/lib/" "$OUT/info.out" &&
	ok "python -m weft info: the venv's package" || fail "python -m weft info: $(cat "$OUT/info.out")"
"$V" -m weft settings >"$OUT/settings.out" 2>&1 && grep -q '^WEFT_TIMEOUT ' "$OUT/settings.out" &&
	ok "python -m weft settings" || fail "python -m weft settings: $(head -3 "$OUT/settings.out")"
"$V" -c '
import numpy as np, weft
with weft.Comm(1, weft.get_unique_id(), 0) as c:
    x = np.arange(4, dtype=np.float64)
    c.allreduce(x)
    assert x.tolist() == [0, 1, 2, 3], x
' >"$OUT/one.out" 2>&1 && ok "a one-rank allreduce" || fail "a one-rank allreduce: $(cat "$OUT/one.out")"
if [ $torch = 1 ]; then
	cat >"$OUT/ddp.py" <<'PYEOF'
import os, sys
import torch
import torch.distributed as dist
import weft
import weft.torch  # noqa: F401
ext = sys.modules["weft._torch_ext"].__file__
assert ext.startswith(sys.prefix), f"{ext} is not the venv's"
rank, size = int(os.environ["WEFT_RANK"]), int(os.environ["WEFT_NRANKS"])
port = int(os.environ["WEFT_ROOT"].rsplit(":", 1)[1]) + 1
dist.init_process_group("weft", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
t = torch.full((100,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == 3), t[:4]
dist.destroy_process_group()
os.write(1, f"rank {rank}: all_reduce ok\n".encode())  # one write: the ranks share the file
PYEOF
	"$BUILD/weft-run" -np 2 "$V" "$OUT/ddp.py" >"$OUT/ddp.out" 2>&1 &&
		grep -q '^rank 0: all_reduce ok$' "$OUT/ddp.out" && grep -q '^rank 1: all_reduce ok$' "$OUT/ddp.out" &&
		ok "the venv's weft.torch: a 2-rank all_reduce" || fail "weft.torch from the venv: $(tail -20 "$OUT/ddp.out")"
fi

# (d) gone again.
pip uninstall -y weft >"$OUT/uninstall.log" 2>&1
if "$V" -c 'import weft' 2>/dev/null; then
	fail "weft still imports after pip uninstall"
else
	ok "pip uninstall weft"
fi
weft_test_end pip
