#!/bin/bash
# test_pacing.sh — the congestion pacer on a fabric that marks.
#
# Builds 2 leaves x 1 host (fabric.sh --spine-rate 300mbit --ecn-mark 24000:
# CE marks on the uplinks above 24000 packets/s, ECN on in the hosts) and
# runs 2 ranks, one per leaf, with WEFT_PACER=dcqcn and the PACE log at
# TRACE:
#   build/allreduce_perf -b 4M -e 4M -n 60 -w 2 across the spine
# Once every rank has cut its rate, the congestion is lifted: the switches'
# marking rules and tbf shaping are deleted, and the job goes on over
# unshaped veths.
# Checks: both ranks exit 0 with "# Out of bounds values : 0 OK"; the
# switches marked packets (fabric.sh marks); every rank negotiated ECN with
# its peer; its pacer cut the rate on the marks to the bottleneck's order
# (below 2 x the 37.5 MB/s spine: the cut starts from the rate the path
# delivered, not from the veth's nominal line rate), and, without marks,
# brought it back to the line rate (DCQCN's fast recovery, additive and
# hyper increase; WEFT_PACER_BYTES=1M so the byte counter counts within
# the run).
# Exit: 0 pass, 1 fail, 77 skipped (not root, ip/tc/lldpd/nft/ethtool missing).
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/allreduce_perf" ] || { echo "FAIL: $BUILD/allreduce_perf not built"; exit 1; }
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spine-rate 300mbit \
		--ecn-mark 24000 -- "$0" "$@"
fi

# shellcheck source=tests/fabric/lib.sh
. "$HERE/lib.sh"
OUT=$(mktemp -d /tmp/weft-test-pacing.XXXXXX)
fail() {
	echo "FAIL: $*"
	exit 1
}
# The first rate below 0.9 x LINE in LOG, or nothing.
first_cut() {
	awk -v line="$2" '/: rate [0-9.]+ MB\/s/ {
			for (i = 1; i < NF; i++) if ($i == "rate") r = $(i + 1) + 0
			if (r < line * 0.9) { print r; exit } }' "$1"
}

# Delete every switch's CE marking and tbf shaping.
lift_congestion() {
	local ns dev
	for ns in $(awk '$1 == "ns" && $2 !~ /-h[0-9]+$/ {print $2}' "$FABRIC_STATE"); do
		ip netns exec "$ns" nft delete table bridge weft_ecn 2>/dev/null
		for dev in $(tc -n "$ns" qdisc show | awk '$2 == "tbf" {print $5}'); do
			tc -n "$ns" qdisc del dev "$dev" root || fail "tc qdisc del dev $dev in $ns"
		done
	done
}

line_of() {
	sed -n 's/.*pacer dcqcn on .*line \([0-9.]*\) MB\/s.*/\1/p' "$1" | head -1
}

fabric_ranks interleaved
m0=$("$FABRIC_SH" marks | awk '{n += $3} END {print n + 0}')
fabric_run_job "$OUT" pace 29300 WEFT_PACER=dcqcn WEFT_PACER_BYTES=1M WEFT_DEBUG=TRACE \
	WEFT_DEBUG_SUBSYS=PACE -- "$BUILD/allreduce_perf" -b 4M -e 4M -n 60 -w 2 &
job=$!
# Wait (at most 60 s) for every rank's first cut, then lift the congestion.
for ((i = 0; i < 600; i++)); do
	cut=0
	for ((r = 0; r < NRANKS; r++)); do
		line=$(line_of "$OUT/pace.$r.err" 2>/dev/null)
		[ -n "$line" ] && [ -n "$(first_cut "$OUT/pace.$r.err" "$line")" ] && cut=$((cut + 1))
	done
	[ "$cut" -eq "$NRANKS" ] && break
	kill -0 "$job" 2>/dev/null || break
	sleep 0.1
done
marks=$("$FABRIC_SH" marks | awk -v m0="$m0" '{n += $3} END {print n - m0}')
lift_congestion
for ((r = 0; r < NRANKS; r++)); do
	wc -l <"$OUT/pace.$r.err" >"$OUT/lifted.$r"
done
echo "ok: congestion lifted after $((i / 10)).$((i % 10)) s"
wait "$job" || fail "the job failed (outputs in $OUT)"
grep -q "Out of bounds values : 0 OK" "$OUT/pace.0.out" || fail "wrong results ($OUT/pace.0.out)"
[ "$marks" -gt 0 ] || fail "the switches marked no packet"
echo "ok: $marks packets CE-marked"
for ((r = 0; r < NRANKS; r++)); do
	log=$OUT/pace.$r.err
	grep -q "ECN negotiated" "$log" || fail "rank $r: ECN not negotiated ($log)"
	line=$(line_of "$log")
	[ -n "$line" ] || fail "rank $r: no paced connection ($log)"
	# While marked: the lowest rate; once lifted: back at the line rate.
	verdict=$(awk -v line="$line" -v lifted="$(cat "$OUT/lifted.$r")" '/: rate [0-9.]+ MB\/s/ {
			for (i = 1; i < NF; i++) if ($i == "rate") r = $(i + 1) + 0
			if (NR <= lifted && (low == "" || r < low)) low = r
			if (NR > lifted && r >= line - 0.5) back = 1 }
		END { printf "%s %s", low == "" ? -1 : low, back + 0 }' "$log")
	read -r low back <<<"$verdict"
	awk -v l="$low" -v line="$line" 'BEGIN {exit !(l >= 0 && l < line * 0.9)}' ||
		fail "rank $r: the pacer never cut below $line MB/s while marked ($log)"
	awk -v l="$low" 'BEGIN {exit !(l < 75)}' ||
		fail "rank $r: the lowest rate, $low MB/s, is not near the 37.5 MB/s bottleneck ($log)"
	[ "$back" -eq 1 ] || fail "rank $r: without marks the rate never came back to $line MB/s ($log)"
	echo "ok: rank $r: cut to $low MB/s on marks, back to the line rate $line MB/s once lifted"
done
rm -rf "$OUT"
echo "PASS"
