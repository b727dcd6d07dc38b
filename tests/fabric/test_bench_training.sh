#!/bin/bash
# test_bench_training.sh — perf/bench_training.sh once at a tiny size: the
# 4-host fabric (2 leaves, 300 Mbit/s uplinks), R = 2 ranks per host
# interleaved, one 64 KiB AllReduce of Weft, Open MPI across the
# namespaces and Gloo, and one DDP step of the cnn. Checks that the
# summary has the row with the uplink bound and every library's time, the
# Weft/Open MPI and Weft/Gloo ratios, and the DDP table (a smoke test of
# the script, not a timing).
# Exit: 0 pass, 1 fail, 77 skipped (not root, fabric tools, Open MPI or torch missing).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
[ -x "$BUILD/mpi_allreduce_perf" ] || { echo "SKIP: $BUILD/mpi_allreduce_perf not built (Open MPI)"; exit 77; }
"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
ls "$REPO"/python/weft/_torch_ext*.so >/dev/null 2>&1 ||
	{ echo "SKIP: the torch extension is not built (make python)"; exit 77; }
OUT=$(mktemp -d /tmp/weft-benchtrain.XXXXXX)
trap 'rm -rf -- "$OUT"' EXIT
FABRIC_JOB_TIMEOUT=240 OMP_NUM_THREADS=1 "$REPO/perf/bench_training.sh" --ranks-per-host 2 \
	--orders interleaved -b 64K -e 64K -n 1 -w 0 --model-ranks 2 --ddp-steps 1 \
	--ddp-pairs 1 "$OUT/b" >"$OUT/log" 2>&1
rc=$?
[ "$rc" -ne 77 ] || { grep -m1 SKIP "$OUT/log"; exit 77; }
sum=$OUT/b/summary.txt
if [ "$rc" -eq 0 ] && [ -f "$sum" ] &&
	awk '$1 == "64K" && NF >= 8 && $2 > 0 && $3 > 0 && $5 > 0 && $6 > 0 && $7 > 0 { f = 1 }
		END { exit !f }' "$sum" && grep -qE '^  weft +[0-9.]+' "$sum" &&
	grep -qE '^  gloo +[0-9.]+' "$sum" && ! grep -q "WRONG" "$sum"; then
	echo "ok: bench_training.sh R=2 interleaved: $(awk '$1 == "64K"' "$sum")"
	echo "PASS: bench_training"
	exit 0
fi
echo "FAIL: bench_training.sh exit $rc"
tail -n 40 "$OUT/log"
[ -f "$sum" ] && cat "$sum"
exit 1
