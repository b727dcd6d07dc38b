#!/bin/bash
# bench_failover.sh — what a spine that dies costs a loop of AllReduces:
# the socket transport's failover (WEFT_REPATH=stall) against none (off).
#
#   perf/bench_failover.sh [--trials N] [--calls C] [--rate R] [--nsocks S]
#                          [--modes "stall off"] [--timeout T] [OUTDIR]
#
# A two-spine namespace fabric (tests/fabric/fabric.sh --spines 2, 2
# leaves x 1 host; root), each spine's links shaped with tbf at R (default
# 500mbit, both directions), 2 ranks one per leaf over the socket
# transport with S sub-flows (default 4), each trial a fresh job of
#   build/step_time -s 16777216 -k -n C -w FILE   (C default 40)
# (every call's result checked, each call's start and end recorded). One
# second in, the spine whose uplinks carried the most in that second is
# blackholed (an nftables drop rule on its forward hook) after a further
# random 0-1 s, and stays dark until the job ends. Per trial:
#   healthy   the median call that ended before the blackhole
#   stall     the longest call, less that median ("failover stall X ms",
#             the issue's figure); with one spine of two dark every later
#             call takes about twice the healthy one, so the longest call
#             from the blackhole on is also given against the median call
#             after the one in flight then: the failover's own cost
#   dark      16 MiB per call over the time in the calls that started after
#             the one in flight at the blackhole (not the untimed checks
#             between calls; a 2-rank ring sends the whole buffer each way),
#             against the surviving spine's rate R ("dark throughput ...
#             of the surviving spine")
#   failed    the job's calls that failed: 0, or 1 when it failed (a rank
#             exits at its first failed call)
# Each mode of --modes (default "stall off") runs N trials (default 20),
# interleaved; with off (no failover) the stall is WEFT_TIMEOUT (--timeout,
# default 10 s here), and the call fails. The summary gives per mode the
# median and worst stall, the median dark throughput and the trials with a
# failed call. OUTDIR (default a new /tmp/weft-bench-failover.*) keeps the
# jobs' output. Take a quiet sitting (/work/shared/BENCH.md).
set -u
set -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=${WEFT_BUILD:-$REPO/build}
PY=${PYTHON:-/usr/bin/python3}
TRIALS=20 CALLS=40 RATE=500mbit NSOCKS=4 MODES="stall off" TIMEOUT=10

usage() { sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; }
while [ $# -gt 0 ]; do
	case $1 in
	--trials) TRIALS=${2:?}; shift 2 ;;
	--calls) CALLS=${2:?}; shift 2 ;;
	--rate) RATE=${2:?}; shift 2 ;;
	--nsocks) NSOCKS=${2:?}; shift 2 ;;
	--modes) MODES=${2:?}; shift 2 ;;
	--timeout) TIMEOUT=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) usage >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -le 1 ] || { usage >&2; exit 2; }
for v in "$TRIALS" "$CALLS" "$NSOCKS" "$TIMEOUT"; do
	case $v in '' | *[!0-9]* | 0) echo "bench_failover: '$v' is not a positive count" >&2; exit 2 ;; esac
done
for m in $MODES; do
	case $m in stall | off | stall+congestion) ;; *) echo "bench_failover: mode '$m'" >&2; exit 2 ;; esac
done

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/step_time" ] || { echo "bench_failover: $BUILD/step_time not built" >&2; exit 1; }
	command -v nft >/dev/null || { echo "bench_failover: nft missing" >&2; exit 1; }
	OUT=${1:-$(mktemp -d /tmp/weft-bench-failover.XXXXXX)}
	mkdir -p "$OUT" || exit 1
	OUT=$(cd "$OUT" && pwd)
	echo "# bench_failover: $TRIALS trial(s) of $CALLS x 16 MiB AllReduce, 2 ranks, $NSOCKS sub-flows," \
		"2 spines at $RATE each, modes: $MODES; load $(cut -d' ' -f1-3 /proc/loadavg); output in $OUT"
	: >"$OUT/trials.txt"
	"$REPO/tests/fabric/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 --spine-rate "$RATE" -- \
		"$0" --trials "$TRIALS" --calls "$CALLS" --rate "$RATE" --nsocks "$NSOCKS" --modes "$MODES" \
		--timeout "$TIMEOUT" "$OUT" >"$OUT/fabric.log" 2>&1
	st=$?
	cat "$OUT/trials.txt"
	[ -s "$OUT/summary.txt" ] || { echo "bench_failover: no summary ($OUT/fabric.log)" >&2; exit 1; }
	cat "$OUT/summary.txt"
	echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	exit "$st"
fi

# Inside the fabric (fabric.sh with): the trial lines go to OUTDIR/trials.txt,
# the summary to OUTDIR/summary.txt, the jobs' output to fabric.log.
OUT=$1
# shellcheck source=tests/fabric/lib.sh
. "$REPO/tests/fabric/lib.sh"
fabric_ranks interleaved
RATE_BPS=$("$FABRIC_SH" rate-bytes "$RATE") || exit 1
# shellcheck disable=SC2034  # lib.sh's fabric_run_job reads it
FABRIC_JOB_TIMEOUT=$((TIMEOUT + 120))
DARK_NS=

uplink_bytes() { "$FABRIC_SH" spines | awk '{print $1, $2, $4}'; }
busiest_ns() { # after a second of a job: the namespace of the spine that carried the most
	local before after spine
	before=$(uplink_bytes)
	sleep 1
	after=$(uplink_bytes)
	spine=$(awk 'NR == FNR {b[$1 " " $2] = $3; next} {d[$2] += $3 - b[$1 " " $2]}
		END {best = ""; for (s in d) if (best == "" || d[s] > d[best]) best = s; print best}' \
		<(echo "$before") <(echo "$after"))
	awk -v s="spine${spine#up}" '$1 == "spine" && $2 == s {print $3}' "$FABRIC_STATE"
}
lift() {
	[ -z "$DARK_NS" ] || ip netns exec "$DARK_NS" nft delete table inet weft_failover 2>/dev/null
	DARK_NS=
}
trap lift EXIT

# trial MODE K: one job, its line on stdout.
trial() {
	local mode=$1 k=$2 label="$1.$2" port=$((29700 + $2 % 200)) jobpid ns t_dark st=0 failed=0
	[ "$mode" != off ] || port=$((port + 200))
	fabric_run_job "$OUT" "$label" "$port" WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS="$NSOCKS" \
		WEFT_REPATH="$mode" WEFT_TIMEOUT="$TIMEOUT" WEFT_DEBUG=INFO -- \
		"$BUILD/step_time" -s 16777216 -k -n "$CALLS" -t 600 -w "$OUT/$label.when" >&2 &
	jobpid=$!
	ns=$(busiest_ns)
	sleep "$("$PY" -c 'import random; print("%.3f" % random.random())')"
	ip netns exec "$ns" nft add table inet weft_failover &&
		ip netns exec "$ns" nft add chain inet weft_failover blackhole \
			'{ type filter hook forward priority 0; policy drop; }' || { echo "cannot blackhole $ns"; exit 1; }
	DARK_NS=$ns
	t_dark=$("$PY" -c 'import time; print("%.6f" % time.monotonic())')
	wait "$jobpid" || st=$?
	lift
	[ "$st" -eq 0 ] || failed=1
	# The failed job's times: rank 0's own, if it wrote them (it does not on failure).
	"$PY" - "$mode" "$k" "$OUT/$label.when" "$t_dark" "$RATE_BPS" "$failed" "$ns" "$TIMEOUT" <<'PYEOF'
import statistics, sys
mode, k, when, t_dark, rate, failed, ns, timeout = sys.argv[1:]
t_dark, rate, failed = float(t_dark), float(rate), int(failed)
try:
    calls = [tuple(map(float, l.split())) for l in open(when) if l.strip()]
except OSError:
    calls = []
if failed or not calls:
    print(f"trial {k} {mode}: {ns} dark; failed calls 1 (stall: the timeout, {timeout} s)")
    sys.exit(0)
healthy = [e - s for s, e in calls if e < t_dark]
hit = next((c for c in calls if c[1] >= t_dark), None)  # the call in flight at the blackhole
dark = [e - s for s, e in calls if hit and s >= hit[1]]
med = statistics.median(healthy) if healthy else float("nan")
longest = max(e - s for s, e in calls)
line = (f"trial {k} {mode}: {ns} dark after {len(healthy)} calls; healthy median {med * 1e3:.1f} ms, "
        f"longest {longest * 1e3:.1f} ms: failover stall {(longest - med) * 1e3:.1f} ms")
if hit and len(dark) >= 2:
    dmed = statistics.median(dark)
    tput = 16777216 * len(dark) / sum(dark)
    worst = max(e - s for s, e in calls if e >= t_dark)
    line += (f" (the longest from the blackhole on {worst * 1e3:.1f} ms, {(worst - dmed) * 1e3:.1f} over the"
             f" median dark call {dmed * 1e3:.1f} ms); dark throughput {tput / 1e6:.1f} MB/s ="
             f" {tput / rate:.2f} of the surviving spine's {rate / 1e6:.1f} MB/s")
else:
    line += "; dark throughput - (too few calls after the blackhole)"
line += f"; healthy {16777216 / med / 1e6:.1f} MB/s = {16777216 / med / (2 * rate):.2f} of both spines'; failed calls 0"
print(line)
PYEOF
}

for ((k = 1; k <= TRIALS; k++)); do
	for m in $MODES; do trial "$m" "$k" >>"$OUT/trials.txt"; done
done
# The summary, per mode.
# shellcheck disable=SC2086  # MODES are words
"$PY" - "$OUT/trials.txt" $MODES >"$OUT/summary.txt" <<'PYEOF'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
for mode in sys.argv[2:]:
    mine = [l for l in lines if l.split()[2] == mode + ":"]
    stalls = [float(m.group(1)) for l in mine if (m := re.search(r"failover stall (-?[\d.]+) ms", l))]
    own = [float(m.group(1)) for l in mine if (m := re.search(r"ms, (-?[\d.]+) over the median dark", l))]
    dark = [float(m.group(1)) for l in mine if (m := re.search(r"= ([\d.]+) of the surviving", l))]
    failed = sum(1 for l in mine if "failed calls 1" in l)
    s = (f"{mode}: {len(mine)} trials, {failed} with a failed call (non-zero)" if failed
         else f"{mode}: {len(mine)} trials, zero failed calls")
    if stalls:
        s += f"; failover stall median {statistics.median(stalls):.1f} ms, worst {max(stalls):.1f} ms"
    if own:
        s += (f" (the longest from the blackhole on over the median dark call: median {statistics.median(own):.1f} ms,"
              f" worst {max(own):.1f} ms)")
    if dark:
        s += f"; dark throughput median {statistics.median(dark):.2f} of the surviving spine (worst {min(dark):.2f})"
    print(s)
PYEOF
