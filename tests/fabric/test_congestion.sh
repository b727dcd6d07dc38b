#!/bin/bash
# test_congestion.sh — congestion control on the namespace test fabric:
# the pacer on a fabric that marks (first), then sub-flows over the
# equal-cost paths of a two-spine fabric; each on a fabric of its own.
#
# The pacer. Builds 2 leaves x 1 host (fabric.sh --spine-rate 300mbit
# --ecn-mark 24000: CE marks on the uplinks above 24000 packets/s, ECN on
# in the hosts) and runs 2 ranks, one per leaf, with WEFT_PACER=dcqcn and
# the PACE log at TRACE:
#   build/allreduce_perf -b 4M -e 4M -n 150 -w 2 across the spine
# Once every rank has cut its rate, the congestion is lifted: the switches'
# marking rules and tbf shaping are deleted, and the job goes on over
# unshaped veths (150 calls: the loop that watches for the cuts shares the
# cores with two ranks that spin, a few tenths of a second per look under
# load, and at 60 it once saw the cuts only as the job ended; the job must
# still run when the congestion is lifted, or the test fails saying so).
# A rate logged once the lifting began counts as after it.
# Checks: both ranks exit 0 with "# Out of bounds values : 0 OK"; the
# switches marked packets (fabric.sh marks); every rank negotiated ECN with
# its peer; its pacer cut the rate on the marks to the bottleneck's order
# (below 2 x the 37.5 MB/s spine: the cut starts from the rate the path
# delivered, not from the veth's nominal line rate), and, without marks,
# brought it back to the line rate (DCQCN's fast recovery, additive and
# hyper increase; WEFT_PACER_BYTES=1M so the byte counter counts within
# the run).
#
# Spraying. Builds 2 leaves x 1 host with 2 spines (fabric.sh --spines 2,
# routed leaves, multipath routes hashed on L4 ports, uplinks shaped at
# 200mbit) and runs 2 ranks, one per leaf, over the socket transport:
#   build/allreduce_perf -b 4M -e 4M -n 4 -w 1
# once with one socket per peer (K=1) and once with 8 (K=8, sprayed,
# WEFT_SPRAY=adaptive), reading the bytes each leaf sent up each uplink
# (fabric.sh spines) around each job. Checks: results correct; K=1: each
# leaf's data went up one uplink (>= 90 % of its bytes); K=8: each leaf sent
# >= 10 % up each of the two uplinks. The kernel seeds its multipath hash
# at random, so which ports go where is not chosen here: 8 sub-flows all
# hashing onto one spine at one leaf has a chance of 2/2^8; the K=8 job is
# tried up to 3 times (new source ports each time) before that is a failure.
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
	"$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spine-rate 300mbit \
		--ecn-mark 24000 -- "$0" pacing || exit $?
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 --spine-rate 200mbit \
		-- "$0" spray
fi

# shellcheck source=tests/fabric/lib.sh
. "$HERE/lib.sh"
OUT=$(mktemp -d "/tmp/weft-test-congestion-$1.XXXXXX")
fail() {
	echo "FAIL: $*"
	exit 1
}
fabric_ranks interleaved

# ---- the pacer

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

pacing() {
	m0=$("$FABRIC_SH" marks | awk '{n += $3} END {print n + 0}')
	fabric_run_job "$OUT" pace 29300 WEFT_PACER=dcqcn WEFT_PACER_BYTES=1M WEFT_DEBUG=TRACE \
		WEFT_DEBUG_SUBSYS=PACE -- "$BUILD/allreduce_perf" -b 4M -e 4M -n 150 -w 2 &
	job=$!
	local t0 running=1
	t0=$(date +%s.%N)
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
	kill -0 "$job" 2>/dev/null || running=0
	# Where each log stands before the lifting starts (its first step, the
	# marking rules' deletion, stops the marks; under load the lifting
	# takes a second or two, and a rate logged meanwhile is "after").
	for ((r = 0; r < NRANKS; r++)); do
		wc -l <"$OUT/pace.$r.err" >"$OUT/lifted.$r"
	done
	marks=$("$FABRIC_SH" marks | awk -v m0="$m0" '{n += $3} END {print n - m0}')
	lift_congestion
	echo "ok: congestion lifted after $((i / 10)).$((i % 10)) s ($(fabric_since "$t0") s of wall time)"
	wait "$job" || fail "the job failed (outputs in $OUT)"
	[ "$running" -eq 1 ] || fail "the job had ended before every rank's first cut was seen: the congestion was lifted after it, so nothing tests the recovery (outputs in $OUT)"
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
}

# ---- spraying

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

spray() {
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
}

case $1 in
pacing) pacing ;;
spray) spray ;;
*) fail "unknown phase '$1'" ;;
esac
rm -rf "$OUT"
echo "PASS: $1"
