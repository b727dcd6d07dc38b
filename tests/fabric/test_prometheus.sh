#!/bin/bash
# test_prometheus.sh — Debian's Prometheus scrapes a running job.
#
# In a network namespace of its own (nothing listens outside it), 3 Python
# ranks serve /metrics (WEFT_METRICS_PORT) and Prometheus (2.42) scrapes
# them every second. The ranks run AllReduce's ring over sockets
# (WEFT_ALGO=allreduce:ring, WEFT_TRANSPORTS=socket), so every byte they
# send goes through the gate that counts it:
#   1. one warm-up AllReduce, then wait until Prometheus has a sample of
#      every rank's series;
#   2. K = 10 AllReduces of 3 MiB (1 MiB blocks): by the ring's own
#      arithmetic each rank sends 2 (n-1) / n x 3 MiB = 4 MiB per call to
#      its ring successor, 40 MiB in all (the job's accounting, which each
#      rank writes down);
#   3. wait until Prometheus has scraped the final counts, then the ranks
#      end.
# Checks, through the HTTP API (/api/v1/query): every target is up and
# Weft's series exist (weft_info, weft_operations_total, ...); for every
# rank, increase() of weft_peer_sent_bytes_total over the range from its
# first to its last sample (evaluated at the last sample, so that nothing
# is extrapolated) equals the bytes the job moved between those scrapes,
# 40 MiB, and equals last - first of the raw samples; increase() of
# weft_operations_total{algorithm="ring"} is 10. No timing is asserted;
# the numbers (scrapes, series, seconds) are printed for the record.
# Exit: 0 pass, 1 fail, 77 skipped (not root, no prometheus, no numpy).

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
PY=/usr/bin/python3
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (a network namespace)"; exit 77; }
command -v prometheus >/dev/null || { echo "SKIP: prometheus not installed (scripts/install-deps.sh)"; exit 77; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy not found"; exit 77; }
NS=wfprom$$
ip netns add "$NS" 2>/dev/null || { echo "SKIP: 'ip netns add' is not permitted here"; exit 77; }
OUT=$(mktemp -d /tmp/weft-test-prometheus.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}" $(ip netns pids "$NS" 2>/dev/null); do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	rm -rf "$OUT"
}
trap cleanup EXIT
FAILS=0
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
ok() { echo "ok: $*"; }
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo up

N=3 K=10 BASE=9400
cat >"$OUT/job.py" <<'EOF'
import os, sys, time
import numpy as np
import weft

out, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
comm = weft.Comm.from_env()
r = comm.rank
x = np.ones(3 * (1 << 18), dtype=np.float32)  # 3 MiB: blocks of 1 MiB
def wait_for(name):
    while not os.path.exists(os.path.join(out, name)):
        time.sleep(0.05)
comm.allreduce(x)  # warm-up: the per-peer series exist from here on
open(os.path.join(out, "ready.%d" % r), "w").close()
wait_for("go")
for i in range(k):
    comm.allreduce(x)
# The ring's arithmetic: 2 (n-1) steps of one block (S / n) each.
moved = k * 2 * (n - 1) * (x.nbytes // n)
with open(os.path.join(out, "moved.%d" % r), "w") as f:
    f.write("%d\n" % moved)
wait_for("stop")  # no last collective: its bytes would count after the check
EOF

cat >"$OUT/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: weft
    static_configs:
      - targets: ['127.0.0.1:$BASE', '127.0.0.1:$((BASE + 1))', '127.0.0.1:$((BASE + 2))']
EOF
in_ns prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/tsdb" \
	--web.listen-address=127.0.0.1:9090 --log.level=warn >"$OUT/prometheus.log" 2>&1 &
PIDS+=($!)

SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
T0=$SECONDS
for ((r = 0; r < N; r++)); do
	in_ns env WEFT_RANK=$r WEFT_NRANKS=$N WEFT_ROOT=127.0.0.1:9300 WEFT_SECRET="$SECRET" \
		WEFT_TRANSPORTS=socket WEFT_SOCKET_IFNAME=lo WEFT_ALGO=allreduce:ring WEFT_LLDP=0 \
		WEFT_METRICS_PORT=$BASE WEFT_METRICS_JOB=promtest WEFT_TIMEOUT=120 WEFT_BUILD="$BUILD" \
		PYTHONPATH="$REPO/python" "$PY" "$OUT/job.py" "$OUT" $N $K >"$OUT/r$r.out" 2>"$OUT/r$r.err" &
	PIDS+=($!)
done

# q QUERY [TIME]: the API's JSON for an instant query.
q() { in_ns curl -sfG http://127.0.0.1:9090/api/v1/query --data-urlencode "query=$1" ${2:+--data-urlencode "time=$2"}; }
# until SECONDS CMD...: retry CMD every 0.2 s for at most SECONDS.
until_ok() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}
n_ready() { [ "$(ls "$OUT"/ready.* 2>/dev/null | wc -l)" -eq $N ]; }
n_moved() { [ "$(ls "$OUT"/moved.* 2>/dev/null | wc -l)" -eq $N ]; }
# every rank's sent bytes as Prometheus holds them equal @1 ("any": exist)
scraped() {
	q "weft_peer_sent_bytes_total" | "$PY" -c '
import json, sys
want, n = sys.argv[1], int(sys.argv[2])
r = json.load(sys.stdin)["data"]["result"]
ranks = {}
for s in r:
    ranks[s["metric"]["rank"]] = ranks.get(s["metric"]["rank"], 0) + float(s["value"][1])
sys.exit(0 if len(ranks) == n and (want == "any" or all(v == float(want) for v in ranks.values())) else 1)' "$1" $N
}

until_ok 90 n_ready || fail "the ranks never got ready: $(tail -3 "$OUT/r0.err")"
until_ok 30 scraped any || fail "Prometheus never scraped every rank: $(tail -3 "$OUT/prometheus.log")"
WARM=$(q 'sum by (rank) (weft_peer_sent_bytes_total)' | "$PY" -c 'import json,sys; print(int(float(json.load(sys.stdin)["data"]["result"][0]["value"][1])))')
touch "$OUT/go"
until_ok 120 n_moved || fail "the job did not finish its AllReduces"
MOVED=$(cat "$OUT/moved.0")
until_ok 30 scraped $((WARM + MOVED)) || fail "Prometheus never saw the final counts"
sleep 1.5 # one more scrape of the final counts
# while the ranks still serve (once they end, their series go stale)
q 'up{job="weft"}' >"$OUT/up.json"
q 'count by (__name__) ({__name__=~"weft_.+", weft_job="promtest"})' >"$OUT/names.json"
q 'count({__name__=~"weft_.+", weft_job="promtest"})' >"$OUT/series.json"
touch "$OUT/stop"
for ((r = 0; r < N; r++)); do
	wait "${PIDS[r + 1]}" || fail "rank $r failed: $(tail -3 "$OUT/r$r.err")"
done
echo "# job: $((SECONDS - T0)) s; each rank moved $MOVED bytes in $K AllReduces (warm-up $WARM)"

# Each rank's raw samples (5 minutes cover the job), then increase() from the
# first sample to the last, evaluated at the last: nothing extrapolated.
for ((r = 0; r < N; r++)); do
	q "weft_peer_sent_bytes_total{rank=\"$r\"}[5m]" >"$OUT/raw.$r.json"
done
"$PY" - "$OUT" $N "$MOVED" <<'EOF' >"$OUT/check.txt" 2>&1
import json, sys
out, n, moved = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
up = json.load(open(out + "/up.json"))["data"]["result"]
if len(up) != n or any(s["value"][1] != "1" for s in up):
    bad.append("targets up: %s" % up)
names = {s["metric"]["__name__"] for s in json.load(open(out + "/names.json"))["data"]["result"]}
for want in ("weft_info", "weft_operations_total", "weft_operation_bytes_total",
             "weft_operation_seconds_bucket", "weft_peer_sent_bytes_total",
             "weft_busbw_bytes_per_second", "weft_events_total", "weft_wait_seconds_total"):
    if want not in names:
        bad.append("no %s" % want)
series = json.load(open(out + "/series.json"))["data"]["result"][0]["value"][1]
print("# %d metric names, %s series in all" % (len(names), series))
for r in range(n):
    res = json.load(open("%s/raw.%d.json" % (out, r)))["data"]["result"]
    if len(res) != 1:
        bad.append("rank %d: %d sent-bytes series, expected 1 (the ring successor)" % (r, len(res)))
        continue
    vals = res[0]["values"]
    t0, v0 = vals[0][0], float(vals[0][1])
    t1, v1 = vals[-1][0], float(vals[-1][1])
    print("rank %d: %d samples over %.1f s, first %d, last %d; peer %s" %
          (r, len(vals), t1 - t0, v0, v1, res[0]["metric"]["peer"]))
    print("R %d %.3f %.3f %d" % (r, t0, t1, int(round((t1 - t0) * 1000))))
    if v1 - v0 != moved:
        bad.append("rank %d: last - first = %d, the job moved %d" % (r, v1 - v0, moved))
for b in bad:
    print("BAD " + b)
EOF
cat "$OUT/check.txt" | grep -v '^R '
grep -q '^BAD ' "$OUT/check.txt" && fail "$(grep '^BAD ' "$OUT/check.txt" | head -3)"
while read -r _ r t0 t1 ms; do
	inc=$(q "increase(weft_peer_sent_bytes_total{rank=\"$r\"}[${ms}ms])" "$t1" |
		"$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(round(float(r[0]["value"][1]))) if r else -1)')
	[ "$inc" = "$MOVED" ] && ok "rank $r: increase() over the job = $inc bytes, the job's own count" ||
		fail "rank $r: increase() = $inc, the job moved $MOVED"
	ops=$(q "sum(increase(weft_operations_total{rank=\"$r\",algorithm=\"ring\"}[${ms}ms]))" "$t1" |
		"$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(round(float(r[0]["value"][1]))) if r else -1)')
	[ "$ops" = $K ] && ok "rank $r: increase() of ring AllReduces = $K" || fail "rank $r: $ops ring AllReduces"
done < <(grep '^R ' "$OUT/check.txt")
grep -q '^R ' "$OUT/check.txt" || fail "no samples to check"
[ $FAILS -eq 0 ] && { echo "PASS: test_prometheus"; exit 0; }
echo "FAIL: test_prometheus ($FAILS failed)"
exit 1
