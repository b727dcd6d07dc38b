#!/bin/bash
# quick.sh — make test's run of torch's own DistributedTest on Weft
# (run.py): the tests Gloo passes here (quick.txt), 3 ranks each, in both
# Weft modes, two tests at a time; `make torch-suite` runs every test.
# Prints each mode's counts beside Gloo's as "ok:" lines.
# Exit: 0 pass, 1 fail, 77 skipped (no torch, or the extension is not
# built or does not load: a sanitizer's libweft cannot load into Python).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
export WEFT_BUILD=$BUILD

"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
if ! why=$(PYTHONPATH=$REPO/python "$PY" -c 'import weft.torch' 2>&1); then
	echo "SKIP: weft.torch does not load from $BUILD: ${why##*$'\n'}"
	exit 77
fi
logs=$(mktemp -d "${TMPDIR:-/tmp}/torch_suite.XXXXXX")
out=$logs/run.out
"$PY" "$HERE/run.py" --mode weft --mode gloo-place --list "$HERE/quick.txt" -j 2 \
	--timeout 120 --logs "$logs" >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -eq 0 ]; then
	grep -E '^ *(weft|gloo-place): ' "$out" | sed 's/^ */ok: /'
	rm -rf "$logs"
fi
exit $rc
