#!/bin/bash
# test_pacing.sh — the congestion pacer on a fabric that marks.
#
# Builds 2 leaves x 1 host (fabric.sh --spine-rate 300mbit --ecn-mark 24000:
# CE marks on the uplinks above 24000 packets/s, ECN on in the hosts) and
# runs 2 ranks, one per leaf, with WEFT_PACER=dcqcn and the PACE log at
# TRACE:
#   build/allreduce_perf -b 4M -e 4M -n 20 -w 2 across the spine
# Checks: both ranks exit 0 with "# Out of bounds values : 0 OK"; the
# switches marked packets (fabric.sh marks); every rank negotiated ECN with
# its peer and its pacer cut the rate below the line rate on the marks
# ("rate X MB/s" below the line's) and later brought it back to the line
# rate (the fast recovery and increase of DCQCN).
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
fabric_ranks interleaved
m0=$("$FABRIC_SH" marks | awk '{n += $3} END {print n + 0}')
fabric_run_job "$OUT" pace 29300 WEFT_PACER=dcqcn WEFT_DEBUG=TRACE WEFT_DEBUG_SUBSYS=PACE -- \
	"$BUILD/allreduce_perf" -b 4M -e 4M -n 20 -w 2 || fail "the job failed (outputs in $OUT)"
grep -q "Out of bounds values : 0 OK" "$OUT/pace.0.out" || fail "wrong results ($OUT/pace.0.out)"
marks=$("$FABRIC_SH" marks | awk -v m0="$m0" '{n += $3} END {print n - m0}')
[ "$marks" -gt 0 ] || fail "the switches marked no packet"
echo "ok: $marks packets CE-marked"
for ((r = 0; r < NRANKS; r++)); do
	log=$OUT/pace.$r.err
	grep -q "ECN negotiated" "$log" || fail "rank $r: ECN not negotiated ($log)"
	line=$(sed -n 's/.*pacer dcqcn on .*line \([0-9.]*\) MB\/s.*/\1/p' "$log" | head -1)
	[ -n "$line" ] || fail "rank $r: no paced connection ($log)"
	# The first rate below the line rate, and a later one back at it.
	verdict=$(awk -v line="$line" '/: rate [0-9.]+ MB\/s/ {
			for (i = 1; i < NF; i++) if ($i == "rate") r = $(i + 1) + 0
			if (r < line * 0.9 && !fell) { fell = 1; low = r }
			else if (fell && r >= line - 0.5) back = 1 }
		END { printf "%s %s %s", fell + 0, back + 0, low + 0 }' "$log")
	read -r fell back low <<<"$verdict"
	[ "$fell" -eq 1 ] || fail "rank $r: the pacer never cut below $line MB/s ($log)"
	[ "$back" -eq 1 ] || fail "rank $r: the rate never came back to $line MB/s ($log)"
	echo "ok: rank $r: cut to $low MB/s on marks, back to the line rate $line MB/s"
done
rm -rf "$OUT"
echo "PASS"
