#!/bin/bash
# test_shrink_fabric.sh — losing ranks across hosts (weft_comm_shrink) on a
# tests/fabric/fabric.sh fabric of 2 leaves x 2 hosts, one rank per host
# (build/shrink_bench: AllReduces in a loop, shrink on a failure, then
# more AllReduces on the new communicator, every result checked):
#
#  (a) rank 0 — whose process hosted the bootstrap root — is killed
#      (SIGKILL): ranks 1-3 go on as a communicator of 3;
#  (b) the host of rank 3 loses its link (its veth down): ranks 0-2, a
#      majority, go on as 3; rank 3 cannot reach a quorum and fails with
#      "no quorum" naming who it reached;
#  (c) a partition, 2 | 2 (leaf1's uplink down): neither half is a strict
#      majority, so no rank goes on — every one fails with "no quorum".
#
# WEFT_TIMEOUT=3 (the cut ranks' AllReduces stall until then) and
# WEFT_PEER_DEAD=1 (silent that long on the watch: unreachable).
# Exit: 0 pass, 1 fail, 77 skipped (not root, the fabric's tools missing).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/shrink_bench" ] || { echo "FAIL: $BUILD/shrink_bench not built"; exit 1; }
	command -v timeout >/dev/null 2>&1 || { echo "SKIP: timeout(1) not found"; exit 77; }
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 2 -- "$0" "$@"
fi

# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$HERE/lib.sh"
fabric_ranks blocked
[ "$NRANKS" -eq 4 ] || { echo "FAIL: expected 4 hosts in the fabric, found $NRANKS"; exit 1; }
fabric_print_ranks
OUT=$(mktemp -d /tmp/weft-shrink-fabric.XXXXXX)
FAILS=0
PORT=29623
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
ok() { echo "ok: $*"; }

# start LABEL: one shrink_bench per host, in the background; pids in PIDS.
start() {
	local label=$1 r
	PIDS=()
	rm -f "$OUT"/pid.*
	PORT=$((PORT + 1))
	for ((r = 0; r < NRANKS; r++)); do
		timeout -k 5 90 "$FABRIC_SH" run "${RANK_HOST[r]}" -- \
			env WEFT_RANK="$r" WEFT_NRANKS="$NRANKS" WEFT_ROOT="${RANK_IP[0]}:$PORT" \
			WEFT_SECRET="$FABRIC_SECRET" WEFT_SOCKET_IFNAME="${RANK_IF[r]}" \
			WEFT_TIMEOUT=3 WEFT_PEER_DEAD=1 WEFT_TRANSPORTS=socket \
			"$BUILD/shrink_bench" --seconds 40 --after 50 --dir "$OUT" \
			>"$OUT/$label.$r.out" 2>"$OUT/$label.$r.err" &
		PIDS+=($!)
	done
	local t
	for ((t = 0; t < 300; t++)); do
		[ "$(find "$OUT" -name 'pid.[0-9]*' | wc -l)" -eq "$NRANKS" ] && return 0
		sleep 0.1
	done
	echo "# $label: the ranks did not get warm"
	return 1
}

# finish: wait for every rank; RC[r] its exit status.
finish() {
	local r
	RC=()
	for ((r = 0; r < NRANKS; r++)); do
		wait "${PIDS[r]}"
		RC+=($?)
	done
}

result() { grep -h '^RESULT' "$OUT/$1.$2.out" 2>/dev/null; }

show() {
	local r
	for ((r = 0; r < NRANKS; r++)); do
		echo "#   $1 rank $r (exit ${RC[r]}): $(result "$1" "$r" | cut -c1-200)"
		[ "${RC[r]}" -eq 0 ] || [ "${2:-}" = quiet ] ||
			tail -n 3 "$OUT/$1.$r.err" | sed 's/^/#     /'
	done
}

# went_on LABEL RANK: the rank shrank to a communicator of 3 and went on.
went_on() {
	[ "${RC[$2]}" -eq 0 ] && result "$1" "$2" | grep -q 'new_size=3 '
}

# no_quorum LABEL RANK: the rank's shrink failed for want of a quorum.
no_quorum() {
	[ "${RC[$2]}" -eq 3 ] && result "$1" "$2" | grep -q 'shrink=failed status=remote.*no quorum'
}

# (a) the root's rank killed
if start kill; then
	victim=$(cat "$OUT/pid.0")
	"$FABRIC_SH" run "${RANK_HOST[0]}" -- kill -KILL "$victim"
	finish
	show kill quiet
	if went_on kill 1 && went_on kill 2 && went_on kill 3; then
		ok "rank 0 killed: ranks 1-3 went on as 3"
	else
		fail "rank 0 killed: the survivors did not all go on"
		show kill
	fi
else
	fail "kill: job did not start"
fi

# (b) rank 3's host loses its link
if start cut; then
	ip -n "${RANK_HOST[3]}" link set "${RANK_IF[3]}" down
	finish
	ip -n "${RANK_HOST[3]}" link set "${RANK_IF[3]}" up
	show cut quiet
	if went_on cut 0 && went_on cut 1 && went_on cut 2; then
		ok "rank 3's link cut: ranks 0-2 (a majority) went on as 3"
	else
		fail "rank 3's link cut: the majority did not go on"
		show cut
	fi
	if no_quorum cut 3; then
		ok "rank 3, cut off: no quorum ($(result cut 3 | sed 's/.*msg=//' | cut -c1-160))"
	else
		fail "rank 3, cut off, did not fail for want of a quorum"
	fi
else
	fail "cut: job did not start"
fi

# (c) a partition 2 | 2: leaf1's uplink down
if start partition; then
	uplink_ns=$(awk '$1 == "uplink" && $2 == "leaf1" {print $3}' "$FABRIC_STATE")
	uplink_if=$(awk '$1 == "uplink" && $2 == "leaf1" {print $4}' "$FABRIC_STATE")
	ip -n "$uplink_ns" link set "$uplink_if" down
	finish
	ip -n "$uplink_ns" link set "$uplink_if" up
	show partition quiet
	if no_quorum partition 0 && no_quorum partition 1 && no_quorum partition 2 &&
		no_quorum partition 3; then
		ok "partition 2 | 2: neither half went on (no quorum on every rank)"
	else
		fail "partition 2 | 2: some rank did not fail for want of a quorum"
		show partition
	fi
else
	fail "partition: job did not start"
fi

rm -rf "$OUT"
[ "$FAILS" -eq 0 ] && echo "PASS: shrink across hosts" && exit 0
exit 1
