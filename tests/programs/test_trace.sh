#!/bin/bash
# test_trace.sh — a job killed by its launcher before Weft's own timeout,
# and the verdict weft-topo --trace draws from its flight recorders:
#   (a) 4 Python ranks (weft.Comm.from_env, WEFT_TIMEOUT=300) loop
#       allreduces; rank 2 stops calling at its 8th (seq 7) and sleeps. Once
#       the others wait in seq 7, every rank gets SIGTERM, as mpirun, srun
#       or torchrun end a job: each dies of it and leaves its recorder in
#       WEFT_TRACE_DIR (reason "signal SIGTERM"); rank 0 also wrote one
#       with Comm.dump(path) at seq 3, and weft.dump(comm) into the
#       directory;
#   (b) weft-topo --trace on the four files: allreduce seq 7 is the first
#       operation not every rank posted, ranks 0,1,3 posted it and rank 2
#       never did, and every waiter waits on rank 2 (text, and JSON);
#   (c) bad input: a missing file, a file that is not JSON, JSON that is
#       not a recorder, no files at all, --trace with -np.
# Exit: 0 pass, 1 fail, 77 skipped (no python3 with numpy).
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
weft_test_python
TOPO=$BUILD/weft-topo
[ -x "$TOPO" ] || { echo "FAIL: $TOPO not built"; exit 1; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY has no numpy"; exit 77; }
weft_test_scratch trace-test
mkdir -p "$OUT/trace"

cat >"$OUT/job.py" <<'EOF'
import os, sys, time
import numpy as np
import weft

comm = weft.Comm.from_env()
rank = comm.rank
x = np.ones(1 << 14, dtype=np.float32)
for i in range(100000):
    if rank == 2 and i == 7:
        print("STUCK", flush=True)
        time.sleep(600)
    if rank == 0 and i == 7:
        print("WAITING", flush=True)
    comm.allreduce(x)
    if rank == 0 and i == 3:
        comm.dump(sys.argv[1])
        print("DUMPED", weft.dump(comm), flush=True)
    x[:] = 1
EOF

PORT=$((20000 + $$ % 20000))
SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
PIDS=()
for r in 0 1 2 3; do
	env WEFT_RANK=$r WEFT_NRANKS=4 WEFT_ROOT=127.0.0.1:$PORT WEFT_SECRET="$SECRET" \
		WEFT_TIMEOUT=300 WEFT_TRACE_DIR="$OUT/trace" WEFT_BUILD="$BUILD" \
		PYTHONPATH="$REPO/python" "$PY" "$OUT/job.py" "$OUT/early.json" \
		>"$OUT/r$r.out" 2>"$OUT/r$r.err" &
	PIDS+=($!)
done
# Until rank 2 is stuck and rank 0 waits in seq 7 (at most 60 s), then a
# second for the others to be inside it too.
for ((i = 0; i < 600; i++)); do
	grep -q STUCK "$OUT/r2.out" 2>/dev/null && grep -q WAITING "$OUT/r0.out" 2>/dev/null && break
	sleep 0.1
done
sleep 1
kill -TERM "${PIDS[@]}" 2>/dev/null
for r in 0 1 2 3; do
	st=0
	wait "${PIDS[r]}" || st=$?
	[ $st -eq 143 ] || fail "rank $r: exit $st, not 143 (SIGTERM): $(tail -3 "$OUT/r$r.err")"
done

# ---- (a) the files ----
n=$(ls "$OUT"/trace/weft-trace-*.json 2>/dev/null | wc -l)
[ "$n" -eq 4 ] && ok "4 recorders in WEFT_TRACE_DIR" || fail "$n recorders in WEFT_TRACE_DIR, not 4"
for r in 0 1 2 3; do
	f=$(ls "$OUT"/trace/weft-trace-*-r$r-*.json 2>/dev/null | head -1)
	grep -q '"reason":"signal SIGTERM"' "$f" 2>/dev/null && ok "rank $r: signal SIGTERM" ||
		fail "rank $r: no SIGTERM dump ($f)"
done
"$PY" - "$OUT/early.json" <<'EOF' && ok "Comm.dump(path) at seq 3" || fail "Comm.dump(path): $OUT/early.json"
import json, sys
d = json.load(open(sys.argv[1]))
ops = [o for o in d["ops"] if o["coll"] == "allreduce"]
assert d["reason"] == "weft_comm_dump" and d["calls"] == 4, d
assert [o["call"] for o in ops] == [0, 1, 2, 3] and all(o["state"] == "done" for o in ops), ops
assert ops[0]["count"] == 1 << 14 and ops[0]["dtype"] == "float", ops[0]
EOF
grep -q "DUMPED $OUT/trace/weft-trace-" "$OUT/r0.out" && ok "weft.dump(comm) names its file" ||
	fail "weft.dump(comm): $(cat "$OUT/r0.out")"

# ---- (b) the verdict ----
"$TOPO" --trace "$OUT"/trace/weft-trace-*.json >"$OUT/verdict.txt" 2>&1 || fail "weft-topo --trace failed"
sed 's/^/#   /' "$OUT/verdict.txt"
grep -q "allreduce seq 7 (float sum, 16384 elements) is the first operation not every rank posted: ranks 0,1,3 posted it; rank 2 never did" \
	"$OUT/verdict.txt" && ok "the first divergent operation and who never posted it" ||
	fail "no divergence line naming rank 2"
grep -q "every waiter waits, directly or through others, on rank 2 (" "$OUT/verdict.txt" &&
	ok "every waiter waits on rank 2" || fail "the chain of waits does not end at rank 2"
grep -q "rank 2 (.*): signal SIGTERM; 7 collectives called; idle: its last, allreduce seq 6" \
	"$OUT/verdict.txt" && ok "rank 2 was idle after seq 6" || fail "rank 2's line"
"$TOPO" --trace --format json "$OUT"/trace/weft-trace-*.json >"$OUT/verdict.json" ||
	fail "weft-topo --trace --format json failed"
"$PY" - "$OUT/verdict.json" <<'EOF' && ok "the verdict as JSON" || fail "the JSON verdict"
import json, sys
c = json.load(open(sys.argv[1]))["communicators"]
assert len(c) == 1, c
v = c[0]
assert v["divergence"] == "missing" and v["call"] == 7, v
assert v["posted_by"] == [0, 1, 3] and v["never_posted_by"] == [2], v
assert v["chains_end_at"] == [2] and v["dumps"] == 4 and v["no_dump"] == [], v
assert {w["rank"] for w in v["waits"]} == {0, 1, 3}, v["waits"]
EOF

# ---- (c) bad input ----
echo '{"not": "a dump"}' >"$OUT/other.json"
echo 'garbage' >"$OUT/garbage.json"
expect_fail 1 "missing.json: .*No such file" "$TOPO" --trace "$OUT/missing.json"
expect_fail 1 "garbage.json: " "$TOPO" --trace "$OUT/garbage.json"
expect_fail 1 "other.json: not a Weft flight recorder: \"weft_trace\"" "$TOPO" --trace "$OUT/other.json"
expect_fail 2 "no files given" "$TOPO" --trace
expect_fail 2 "reads files" "$TOPO" --trace -np 2 "$OUT/other.json"

weft_test_end test_trace
