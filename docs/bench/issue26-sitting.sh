#!/bin/bash
# Issue 26 sittings, from a built checkout, on a quiet machine (nothing else running).
# Usage: sitting.sh N OUTDIR   (N = sitting number)
set -u
n=$1 out=$2
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.." || exit 1
stamp() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $*" | tee -a "$out/log"; }
stamp "sitting $n at $(git rev-parse --short HEAD)"
stamp "ddp cnn"
/usr/bin/timeout 900 build/weft-run -np 2 /usr/bin/python3 perf/ddp_bench --model cnn --threads 2 --pairs 3 > "$out/ddp-cnn.txt" 2>&1; echo rc=$? >> "$out/ddp-cnn.txt"
stamp "ddp mlp"
/usr/bin/timeout 900 build/weft-run -np 2 /usr/bin/python3 perf/ddp_bench --model mlp --threads 2 --pairs 3 > "$out/ddp-mlp.txt" 2>&1; echo rc=$? >> "$out/ddp-mlp.txt"
stamp "ddp transformer"
/usr/bin/timeout 900 build/weft-run -np 2 /usr/bin/python3 perf/ddp_bench --model transformer --threads 2 --pairs 1 --steps 5 > "$out/ddp-transformer.txt" 2>&1; echo rc=$? >> "$out/ddp-transformer.txt"
stamp "bench_training"
/usr/bin/timeout 1500 perf/bench_training.sh "$out/training" > "$out/training.txt" 2>&1; echo rc=$? >> "$out/training.txt"
stamp "compare"
/usr/bin/timeout 1500 /usr/bin/python3 perf/compare -r 1 -e 64M --near 200 --near-wait 60 --log "$out/compare.log" > "$out/compare.txt" 2>&1; echo rc=$? >> "$out/compare.txt"
stamp "sweep_algos"
/usr/bin/timeout 600 /usr/bin/python3 perf/sweep_algos --quick --colls allreduce --np "2 3 4" > "$out/sweep.txt" 2>&1; echo rc=$? >> "$out/sweep.txt"
stamp "done"
