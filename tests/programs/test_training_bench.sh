#!/bin/bash
# test_training_bench.sh — issue 26's benchmarks at a tiny size (a smoke
# test of what they print and refuse, not a timing):
#   (a) perf/ddp_bench under weft-run, 2 ranks, the cnn for one timed step
#       on weft, gloo and none (the compute floor): the three rows, a RESULT
#       line whose checksums agree between weft and gloo, gloo/weft > 0,
#       and both backends' step over the floor;
#   (b) the same under torchrun, with --model allreduce (a Gloo and a Weft
#       time for each size);
#   (c) build/idle_perf -np 2 under WEFT_WAIT=block: a median CPU share;
#   (d) bad input: ddp_bench refuses an unknown model, a bad --threads and
#       the floor for --model allreduce with exit 2, naming them.
# Exit: 0 pass, 1 fail, 77 skipped (no Debian torch or the extension).
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
PY=/usr/bin/python3
[ -x "$BUILD/idle_perf" ] && [ -x "$BUILD/weft-run" ] || { echo "FAIL: $BUILD not built"; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
ls "$REPO"/python/weft/_torch_ext*.so >/dev/null 2>&1 ||
	{ echo "SKIP: the torch extension is not built (make python)"; exit 77; }
weft_test_scratch training-bench
export PYTHONPATH=$REPO/python WEFT_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 WEFT_TIMEOUT=60
unset WEFT_TRANSPORTS WEFT_ALGO RANK WORLD_SIZE MASTER_ADDR MASTER_PORT

# The RESULT json of a run's output ($1), checked by the Python in $2.
check_result() {
	"$PY" - "$1" "$2" <<'EOF'
import json, sys
res = [json.loads(l.split("RESULT ", 1)[1]) for l in open(sys.argv[1]) if "RESULT {" in l]
if len(res) != 1:
    sys.exit("%d RESULT lines" % len(res))
r = res[0]
exec(sys.argv[2])
EOF
}

# ---- (a) weft-run, the cnn ----
if timeout 300 "$BUILD/weft-run" -np 2 "$PY" "$REPO/perf/ddp_bench" --model cnn --batch 4 \
	--steps 1 --warmup 1 --pairs 1 --backend weft,gloo,none >"$OUT/cnn" 2>"$OUT/cnn.err" &&
	grep -qE '^  weft +[0-9.]+' "$OUT/cnn" && grep -qE '^  gloo +[0-9.]+' "$OUT/cnn" &&
	grep -qE '^  none +[0-9.]+' "$OUT/cnn" && grep -q '^# step time over the compute floor' "$OUT/cnn" &&
	msg=$(check_result "$OUT/cnn" '
b = r["backends"]
assert r["ranks"] == 2 and set(b) == {"weft", "gloo", "none"}, r
assert set(r["over_floor"]) == {"weft", "gloo"} and all(v > 0 for v in r["over_floor"].values()), r
assert all(b[k]["step_ms"] > 0 and b[k]["cpu_s_per_step"] >= 0 for k in b), b
assert r["checksum_rel_diff"] < 1e-4, r["checksum_rel_diff"]
assert r["gloo_over_weft"] > 0' 2>&1); then
	ok "ddp_bench cnn under weft-run: weft, gloo and the compute floor's rows, checksums agree"
else
	fail "ddp_bench cnn: ${msg:-} $(cat "$OUT/cnn" "$OUT/cnn.err" | tail -n 15)"
fi
msg=

# ---- (b) torchrun, allreduce ----
if timeout 300 "$PY" -m torch.distributed.run --nproc_per_node 2 --redirects 1 --tee 1 \
	--master_port "$((20000 + RANDOM % 20000))" "$REPO/perf/ddp_bench" --model allreduce \
	--sizes 4K,64K --steps 2 --warmup 1 --pairs 1 >"$OUT/ar" 2>"$OUT/ar.err" &&
	msg=$(check_result "$OUT/ar" '
b = r["backends"]
assert r["sizes"] == [4096, 65536], r
assert all(len(b[k]["us"]) == 2 and min(b[k]["us"]) > 0 for k in ("weft", "gloo")), b' 2>&1); then
	ok "ddp_bench --model allreduce under torchrun: a time per size and backend"
else
	fail "ddp_bench allreduce: ${msg:-} $(cat "$OUT/ar" "$OUT/ar.err" | tail -n 15)"
fi
msg=

# ---- (c) idle_perf ----
if WEFT_WAIT=block timeout 120 "$BUILD/idle_perf" -np 2 -n 2 >"$OUT/idle" 2>&1 &&
	grep -qE '^idle cpu median [0-9.]+ % of a core, wait median [0-9.]+ ms \(2 trials\)' \
		"$OUT/idle"; then
	ok "idle_perf -np 2 -n 2: $(grep '^idle' "$OUT/idle")"
else
	fail "idle_perf: $(head -c 400 "$OUT/idle")"
fi

# ---- (d) bad input ----
expect_fail 2 "invalid choice: 'resnet'" "$PY" "$REPO/perf/ddp_bench" --model resnet
expect_fail 2 "--threads 'x'" "$PY" "$REPO/perf/ddp_bench" --threads x
expect_fail 2 "and none beside them for a model" "$PY" "$REPO/perf/ddp_bench" --model allreduce --backend gloo,none
weft_test_end "training benchmarks"
