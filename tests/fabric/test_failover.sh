#!/bin/bash
# test_failover.sh — a spine that dies in the middle of a loop of AllReduces
# (the socket transport's failover, docs/reliability.md).
#
# Builds 2 leaves x 1 host with 2 spines (fabric.sh --spines 2: routed
# leaves, multipath routes hashed on L4 ports, links unshaped) and runs 2
# ranks, one per leaf, over the socket transport with 4 sub-flows per peer:
#   build/allreduce_perf -b 16M -e 16M -n ITERS -w 1   (results checked)
# First once healthy (the time it takes), then again with the spine that
# carried the most bytes in the job's first second blackholed (an nftables
# drop rule on its forward hook) until the job ends.
# Checks: both jobs exit 0 with "# Out of bounds values : 0 OK" (every call
# completed, exact); the blackholed job logged at least one sub-flow failed
# over (INFO "failed over") unless no sub-flow crossed that spine; prints
# the failed job's extra time over the healthy one (the cost of failing
# over, no benchmark: perf/ is where figures belong); each rank's stats file
# (WEFT_STATS_FILE, read by weft-topo --stats) counts failovers and
# replacements (new ports) as its INFO lines do, none in the healthy job.
# Exit: 0 pass, 1 fail, 77 skipped (not root, ip/tc/lldpd/nft missing).

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
ITERS=${FAILOVER_ITERS:-60}

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/allreduce_perf" ] || { echo "FAIL: $BUILD/allreduce_perf not built"; exit 1; }
	command -v nft >/dev/null || { echo "SKIP: nft missing"; exit 77; }
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 -- "$0" run
fi

# shellcheck source=tests/fabric/lib.sh
. "$HERE/lib.sh"
OUT=$(mktemp -d /tmp/weft-test-failover.XXXXXX)
fail() {
	echo "FAIL: $*"
	exit 1
}
fabric_ranks interleaved

# "leafL upS BYTES" lines.
uplink_bytes() { "$FABRIC_SH" spines | awk '{print $1, $2, $4}'; }

job() {
	local label=$1 port=$2
	fabric_run_job "$OUT" "$label" "$port" WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS=4 \
		WEFT_REPATH=stall WEFT_DEBUG=INFO WEFT_STATS_FILE="$OUT/$label.stats.%r" -- \
		"$BUILD/allreduce_perf" -b 16M -e 16M -n "$ITERS" -w 1 >&2 ||
		fail "$label: the job failed ($OUT)"
	grep -q "Out of bounds values : 0 OK" "$OUT/$label.0.out" || fail "$label: wrong results ($OUT)"
}

t0=$(date +%s.%N)
job healthy 29600
healthy=$(echo "$(date +%s.%N) - $t0" | bc)
echo "healthy: $ITERS x 16 MiB AllReduce in ${healthy} s"

before=$(uplink_bytes)
t0=$(date +%s.%N)
job dark 29601 &
jobpid=$!
sleep 1
after=$(uplink_bytes)
# The spine whose uplinks carried the most in that second.
spine=$(awk 'NR == FNR {b[$1 " " $2] = $3; next} {d[$2] += $3 - b[$1 " " $2]}
	END {best = ""; for (s in d) if (best == "" || d[s] > d[best]) best = s; print best}' \
	<(echo "$before") <(echo "$after"))
crossed=$(awk -v s="$spine" 'NR == FNR {b[$1 " " $2] = $3; next}
	$2 == s {d += $3 - b[$1 " " $2]} END {print d + 0}' <(echo "$before") <(echo "$after"))
sns=$(awk -v s="spine${spine#up}" '$1 == "spine" && $2 == s {print $3}' "$FABRIC_STATE")
[ -n "$sns" ] || fail "no namespace for spine $spine"
ip netns exec "$sns" nft add table inet weft_failover &&
	ip netns exec "$sns" nft add chain inet weft_failover blackhole \
		'{ type filter hook forward priority 0; policy drop; }' ||
	fail "could not blackhole $sns"
echo "blackholed $sns (its uplinks carried $crossed bytes in the job's first second)"
wait "$jobpid" || exit 1
dark=$(echo "$(date +%s.%N) - $t0" | bc)
ip netns exec "$sns" nft delete table inet weft_failover
fo=$(cat "$OUT"/dark.*.err | grep -c "failed over")
echo "dark: $ITERS x 16 MiB AllReduce in ${dark} s, $fo sub-flow failover(s) logged"
grep -h "failed over" "$OUT"/dark.*.err | head -n 8 | sed 's/^/#   /'
[ "$crossed" -eq 0 ] || [ "$fo" -ge 1 ] || fail "traffic crossed $sns but no sub-flow failed over"
# The counters: each rank's stats file (its last line per peer, written at
# finalize) counts the failovers and replacements its INFO lines told, save
# any during the flush after it; the healthy job counts none.
counted() { # FILE... -> "failovers replaced"
	"$BUILD/weft-topo" --stats --format json "$@" |
		/usr/bin/python3 -c 'import json, sys
c = json.load(sys.stdin)["connections"]
print(sum(x["failovers"] for x in c), sum(x["replaced"] for x in c))'
}
read -r hfo hrep <<<"$(counted "$OUT"/healthy.stats.*)" || fail "weft-topo --stats (healthy)"
[ "$hfo $hrep" = "0 0" ] || fail "the healthy job counted $hfo failovers, $hrep replacements"
for r in 0 1; do
	logfo=$(grep -c "failed over" "$OUT/dark.$r.err")
	logrep=$(grep -c "moved from port [0-9]* to port [0-9]* after" "$OUT/dark.$r.err")
	read -r sfo srep <<<"$(counted "$OUT/dark.stats.$r")" || fail "weft-topo --stats (rank $r)"
	[ "$sfo" -le "$logfo" ] && [ "$srep" -le "$logrep" ] && { [ "$logfo" -eq 0 ] || [ "$sfo" -ge 1 ]; } ||
		fail "rank $r: the stats file counts $sfo failovers and $srep replacements, its log $logfo and $logrep"
	echo "rank $r: $sfo failover(s), $srep replacement(s) in its stats file ($logfo, $logrep in its log)"
done
"$BUILD/weft-topo" --stats "$OUT"/dark.stats.* | sed 's/^/#   /'
echo "ok: every call completed exact with $sns dark; extra time $(echo "$dark - $healthy" | bc) s"
rm -rf "$OUT"
echo "PASS: failover"
