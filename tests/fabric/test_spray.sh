#!/bin/bash
# test_spray.sh — sub-flows over the equal-cost paths of a two-spine fabric.
#
# Builds 2 leaves x 1 host with 2 spines (fabric.sh --spines 2, routed
# leaves, multipath routes hashed on L4 ports, uplinks shaped at 200mbit)
# and runs 2 ranks, one per leaf, over the socket transport:
#   build/allreduce_perf -b 4M -e 4M -n 4 -w 1
# once with one socket per peer (K=1) and once with 8 (K=8, sprayed,
# WEFT_SPRAY=adaptive), reading the bytes each leaf sent up each uplink
# (fabric.sh spines) around each job. Checks: results correct; K=1: each
# leaf's data went up one uplink (>= 90 % of its bytes); K=8: each leaf sent
# >= 10 % up each of the two uplinks. The kernel seeds its multipath hash
# at random, so which ports go where is not chosen here: 8 sub-flows all
# hashing onto one spine at one leaf has a chance of 2/2^8; the K=8 job is
# tried up to 3 times (new source ports each time) before that is a failure.
# Exit: 0 pass, 1 fail, 77 skipped (not root, ip/tc/lldpd missing).
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/allreduce_perf" ] || { echo "FAIL: $BUILD/allreduce_perf not built"; exit 1; }
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 --spine-rate 200mbit \
		-- "$0" "$@"
fi

# shellcheck source=tests/fabric/lib.sh
. "$HERE/lib.sh"
OUT=$(mktemp -d /tmp/weft-test-spray.XXXXXX)
fail() {
	echo "FAIL: $*"
	exit 1
}
fabric_ranks interleaved

# uplink_bytes: "leaf1 up1 N" lines.
uplink_bytes() { "$FABRIC_SH" spines | awk '{print $1, $2, $4}'; }

# run_spray LABEL PORT [VAR=VALUE...]: one job; prints "leaf share-of-up1"
# for each leaf from the uplink counters' differences.
run_spray() {
	local label=$1 port=$2 before after
	shift 2
	before=$(uplink_bytes)
	fabric_run_job "$OUT" "$label" "$port" WEFT_TRANSPORTS=socket "$@" -- \
		"$BUILD/allreduce_perf" -b 4M -e 4M -n 4 -w 1 >&2 || fail "$label: the job failed ($OUT)"
	grep -q "Out of bounds values : 0 OK" "$OUT/$label.0.out" || fail "$label: wrong results"
	after=$(uplink_bytes)
	awk 'NR == FNR {b[$1 " " $2] = $3; next}
		{d = $3 - b[$1 " " $2]; tot[$1] += d; if ($2 == "up1") up1[$1] = d}
		END {for (l in tot) printf "%s %.3f %d\n", l, tot[l] ? up1[l] / tot[l] : 0, tot[l]}' \
		<(echo "$before") <(echo "$after") | sort
}

shares=$(run_spray one 29500 WEFT_SOCKET_NSOCKS=1)
echo "K=1: leaf, share of up1, bytes:" $shares
while read -r leaf s bytes; do
	[ "$bytes" -gt 8000000 ] || fail "K=1: $leaf sent only $bytes bytes up its uplinks"
	awk -v s="$s" 'BEGIN {exit !(s >= 0.9 || s <= 0.1)}' ||
		fail "K=1: $leaf split its one connection over both spines ($s up1)"
done <<<"$shares"
echo "ok: K=1 took one spine per direction"

for try in 1 2 3; do
	shares=$(run_spray "spray$try" $((29500 + try)) WEFT_SOCKET_NSOCKS=8 WEFT_SPRAY=adaptive)
	echo "K=8 (try $try): leaf, share of up1, bytes:" $shares
	spread=1
	while read -r leaf s bytes; do
		awk -v s="$s" 'BEGIN {exit !(s >= 0.1 && s <= 0.9)}' || spread=0
	done <<<"$shares"
	[ "$spread" -eq 0 ] || break
done
[ "$spread" -eq 1 ] || fail "K=8: in 3 jobs the sub-flows of some leaf never used both spines"
echo "ok: K=8 sprayed over both spines"
rm -rf "$OUT"
echo "PASS"
