#!/bin/bash
# test_failover.sh — paths that die, flap or stay dark under a loop of
# AllReduces (the socket transport's failover, docs/reliability.md).
#
# Builds 2 leaves x 1 host with 2 spines (fabric.sh --spines 2: routed
# leaves, multipath routes hashed on L4 ports, links unshaped) and runs 2
# ranks, one per leaf, over the socket transport with WEFT_REPATH=stall:
#   build/step_time -s 16777216 -k -n CALLS   (16 MiB AllReduces, every
#                                             call's result checked)
# "The spine" below is the one whose uplinks carried the most bytes in the
# job's first second. Steps (FAILOVER_STEPS, default all, in this order):
#   nft       4 sub-flows; once healthy (the time it takes), then with the
#             spine blackholed (an nftables drop rule on its forward hook)
#             until the job ends: at least one sub-flow failed over (INFO
#             "failed over") unless no sub-flow crossed it; each rank's stats
#             file (WEFT_STATS_FILE, weft-topo --stats) counts failovers and
#             replacements (new ports) as its INFO lines do, none when healthy;
#             the communicator's description after the last call (step_time
#             -d, weft_comm_describe's connections.paths) sums them job-wide
#   linkdown  4 sub-flows; leaf1's uplink to the spine set down (ip link) for
#             a second, then up again, the job going on after it; the
#             leaf's multipath route has its next hop through it back
#   single    1 sub-flow (WEFT_SOCKET_NSOCKS=1), the spine blackholed a
#             second in; the job runs until its sub-flow moved and a second
#             more (at most FAILOVER_SINGLE_DARK_S, default 10 s, dark):
#             the job survives by re-pathing, the sub-flow replaced on a
#             new source port ("moved from port")
#   flap      4 sub-flows; FAILOVER_FLAPS times (default 5: 10 s; the issue
#             asks for 20 s, FAILOVER_FLAPS=10 gives it) leaf1's uplink that
#             carried the most in the last second (up) goes down for 1 s
#             (the same link while traffic stays on it; after a failover
#             the traffic may have left it, and a link that carries nothing
#             tests nothing), the job running until they end;
#             no fragment reached the user twice (the results are exact; the
#             stats files count the duplicates dropped)
#   dead      4 sub-flows, WEFT_PEER_DEAD=1, WEFT_TIMEOUT=5
#             (FAILOVER_DEAD_TIMEOUT): both spines blackholed a second in and
#             kept dark: both ranks fail within FAILOVER_DEAD_BOUND s
#             (default WEFT_TIMEOUT) of the blackhole, before their timeout, each
#             naming the other as unreachable with its dark sub-flows and
#             the watch's silence (the watch's UDP crosses the same spines:
#             it goes dark too). A rank with nothing in flight when the
#             paths went dark (a receive waiting, or a send waiting only
#             for the peer's acknowledgements) probes its quiet sockets and
#             so finds them dark too (unit/transports/failover
#             receiver_dark, sender_dark)
#   alive     4 sub-flows, WEFT_PEER_DEAD=1, WEFT_TIMEOUT=5: both spines
#             drop TCP only, a second in: every data path is dark but the
#             watch (UDP) still hears the peer, so neither rank declares
#             the other failed; each says so once (WARN "answers on the
#             watch") and fails at WEFT_TIMEOUT (its no-progress clock
#             runs from its last progress, just before the blackhole: the
#             job must last more than WEFT_TIMEOUT - 1 s), naming the
#             other and its dark paths (its timeout's line)
# Every job but dead and alive must exit 0 with every call exact (step_time -k stops
# at the first wrong one and exits 1; its input changes with every call, so
# a fragment reduced twice, placed wrong or left from an earlier call
# shows). Each step prints its time ("# STEP: N s").
# Exit: 0 pass, 1 fail, 77 skipped (not root, ip/tc/lldpd/nft missing).

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
ITERS=${FAILOVER_ITERS:-100}
SINGLE_DARK_S=${FAILOVER_SINGLE_DARK_S:-10}
STEPS=${FAILOVER_STEPS:-nft linkdown single flap dead alive}
FLAPS=${FAILOVER_FLAPS:-5}
DEAD_TIMEOUT=${FAILOVER_DEAD_TIMEOUT:-5}
DEAD_BOUND=${FAILOVER_DEAD_BOUND:-$DEAD_TIMEOUT}

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/step_time" ] || { echo "FAIL: $BUILD/step_time not built"; exit 1; }
	command -v nft >/dev/null || { echo "SKIP: nft missing"; exit 77; }
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 -- "$0" run
fi

# shellcheck source=tests/fabric/lib.sh
. "$HERE/lib.sh"
OUT=$(mktemp -d /tmp/weft-test-failover.XXXXXX)
DARK_NS=()
lift_all() {
	local ns
	for ns in "${DARK_NS[@]}"; do ip netns exec "$ns" nft delete table inet weft_failover 2>/dev/null; done
	DARK_NS=()
	[ -z "${DOWN_LINK:-}" ] || ip -n "${DOWN_LINK% *}" link set "${DOWN_LINK#* }" up
	DOWN_LINK=
}
fail() {
	echo "FAIL: $*"
	fabric_kill_ranks
	lift_all
	exit 1
}
fabric_ranks interleaved
LEAF1_NS=$(awk '$1 == "leaf" && $2 == "leaf1" {print $3}' "$FABRIC_STATE")

# "leafL upS BYTES" lines.
uplink_bytes() { "$FABRIC_SH" spines | awk '{print $1, $2, $4}'; }

# job LABEL PORT NSOCKS "STEP_TIME ARGS" [VAR=VALUE...]: 16 MiB AllReduces,
# every call checked (step_time -k); fails the test unless both ranks exit 0
# and rank 0 reports its calls.
job() {
	local label=$1 port=$2 nsocks=$3 args=$4
	shift 4
	# shellcheck disable=SC2086  # ARGS are words
	fabric_run_job "$OUT" "$label" "$port" WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS="$nsocks" \
		WEFT_REPATH=stall WEFT_DEBUG=INFO WEFT_STATS_FILE="$OUT/$label.stats.%r" "$@" -- \
		"$BUILD/step_time" -s 16777216 -k -t 600 $args >&2 ||
		fail "$label: the job failed ($OUT)"
	grep -q "^calls [1-9]" "$OUT/$label.0.out" || fail "$label: rank 0 reported no calls ($OUT)"
}

# busiest_spine: after a second of a job, SPINE (upS), SNS (its namespace)
# and CROSSED (bytes its uplinks carried in that second).
busiest_spine() {
	local before after
	before=$(uplink_bytes)
	sleep 1
	after=$(uplink_bytes)
	SPINE=$(awk 'NR == FNR {b[$1 " " $2] = $3; next} {d[$2] += $3 - b[$1 " " $2]}
		END {best = ""; for (s in d) if (best == "" || d[s] > d[best]) best = s; print best}' \
		<(echo "$before") <(echo "$after"))
	CROSSED=$(awk -v s="$SPINE" 'NR == FNR {b[$1 " " $2] = $3; next}
		$2 == s {d += $3 - b[$1 " " $2]} END {print d + 0}' <(echo "$before") <(echo "$after"))
	SNS=$(awk -v s="spine${SPINE#up}" '$1 == "spine" && $2 == s {print $3}' "$FABRIC_STATE")
	[ -n "$SNS" ] || fail "no namespace for spine $SPINE"
}

blackhole() { # NAMESPACE [tcp]: drop everything it forwards (or its TCP only)
	local policy=drop
	[ "${2:-}" != tcp ] || policy=accept
	ip netns exec "$1" nft add table inet weft_failover &&
		ip netns exec "$1" nft add chain inet weft_failover blackhole \
			"{ type filter hook forward priority 0; policy $policy; }" &&
		{ [ "${2:-}" != tcp ] ||
			ip netns exec "$1" nft add rule inet weft_failover blackhole meta l4proto tcp drop; } ||
		fail "could not blackhole $1"
	DARK_NS+=("$1")
}

link_set() { # up|down: leaf1's uplink to $SPINE
	ip -n "$LEAF1_NS" link set "$SPINE" "$1" || fail "ip link set $SPINE $1 in $LEAF1_NS"
	if [ "$1" = down ]; then DOWN_LINK="$LEAF1_NS $SPINE"; else DOWN_LINK=; fi
}

# The failover and replacement lines of LABEL's logs, a few of them shown.
logged() { # LABEL -> "failovers replacements"
	local label=$1
	echo "$(cat "$OUT/$label".*.err | grep -c "failed over")" \
		"$(cat "$OUT/$label".*.err | grep -c "moved from port [0-9]* to port [0-9]* after")"
}
show_log() {
	grep -h "failed over\|moved from port" "$OUT/$1".*.err | head -n "${2:-6}" | sed 's/^/#   /'
}

# The counters: a stats file's last line per peer (written at finalize).
counted() { # FILE... -> "failovers replaced dups"
	"$BUILD/weft-topo" --stats --format json "$@" |
		/usr/bin/python3 -c 'import json, sys
c = json.load(sys.stdin)["connections"]
print(*(sum(x[k] or 0 for x in c) for k in ("failovers", "replaced", "dups")))'
}

# weft_comm_describe's JSON -> "failovers ranks_failed_over" of connections.paths.
described() {
	/usr/bin/python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["connections"]["paths"]
print(p["failovers"], p["ranks_failed_over"])' "$1"
}

step_nft() {
	local t0 jobpid healthy dark fo r logfo logrep sfo srep hfo hrep dfo dranks
	t0=$(date +%s.%N)
	job healthy 29600 4 "-n $ITERS -d $OUT/healthy.describe.json"
	healthy=$(fabric_since "$t0")
	echo "healthy: $ITERS x 16 MiB AllReduce in ${healthy} s"
	t0=$(date +%s.%N)
	job dark 29601 4 "-n $ITERS -d $OUT/dark.describe.json" &
	jobpid=$!
	busiest_spine
	kill -0 "$jobpid" 2>/dev/null || fail "nft: the job ended before $SNS was blackholed (FAILOVER_ITERS=$ITERS: raise it)"
	blackhole "$SNS"
	echo "blackholed $SNS (its uplinks carried $CROSSED bytes in the job's first second)"
	wait "$jobpid" || fail "nft: the job failed"
	dark=$(fabric_since "$t0")
	lift_all
	read -r fo _ <<<"$(logged dark)"
	echo "dark: $ITERS x 16 MiB AllReduce in ${dark} s, $fo sub-flow failover(s) logged"
	show_log dark 8
	[ "$CROSSED" -eq 0 ] || [ "$fo" -ge 1 ] || fail "traffic crossed $SNS but no sub-flow failed over"
	read -r hfo hrep _ <<<"$(counted "$OUT"/healthy.stats.*)" || fail "weft-topo --stats (healthy)"
	[ "$hfo $hrep" = "0 0" ] || fail "the healthy job counted $hfo failovers, $hrep replacements"
	for r in 0 1; do
		logfo=$(grep -c "failed over" "$OUT/dark.$r.err")
		logrep=$(grep -c "moved from port [0-9]* to port [0-9]* after" "$OUT/dark.$r.err")
		read -r sfo srep _ <<<"$(counted "$OUT/dark.stats.$r")" || fail "weft-topo --stats (rank $r)"
		[ "$sfo" -le "$logfo" ] && [ "$srep" -le "$logrep" ] && { [ "$logfo" -eq 0 ] || [ "$sfo" -ge 1 ]; } ||
			fail "rank $r: the stats file counts $sfo failovers and $srep replacements, its log $logfo and $logrep"
		echo "rank $r: $sfo failover(s), $srep replacement(s) in its stats file ($logfo, $logrep in its log)"
	done
	"$BUILD/weft-topo" --stats "$OUT"/dark.stats.* | sed 's/^/#   /'
	# The communicator's description, taken after the last call, sums the
	# job's failovers (connections.paths): none in the healthy job; in the
	# dark one at least one where a sub-flow crossed the spine, and no more
	# than the stats files count at finalize, later.
	read -r dfo dranks <<<"$(described "$OUT/healthy.describe.json")" || fail "healthy: no description"
	[ "$dfo $dranks" = "0 0" ] || fail "the healthy job's description counts $dfo failovers on $dranks ranks"
	read -r dfo dranks <<<"$(described "$OUT/dark.describe.json")" || fail "dark: no description"
	read -r sfo _ <<<"$(counted "$OUT"/dark.stats.*)"
	{ [ "$CROSSED" -eq 0 ] || { [ "$dfo" -ge 1 ] && [ "$dranks" -ge 1 ]; }; } && [ "$dfo" -le "$sfo" ] ||
		fail "the dark job's description counts $dfo failovers on $dranks ranks, its stats files $sfo"
	echo "description: connections.paths counts $dfo failover(s) on $dranks rank(s)"
	echo "ok: nft: every call completed exact with $SNS dark; extra time $(awk -v a="$dark" -v b="$healthy" 'BEGIN { printf "%.3f", a - b }') s"
}

# The multipath route of leaf1 to leaf2's hosts goes through $SPINE again.
route_back() {
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		ip -n "$LEAF1_NS" route show | grep -A3 "^10\.102\." | grep "dev $SPINE " | grep -qv dead && return 0
		sleep 0.2
	done
	ip -n "$LEAF1_NS" route show | sed 's/^/#   /'
	return 1
}

step_linkdown() {
	local jobpid fo rep
	job linkdown 29602 4 "-n $ITERS" &
	jobpid=$!
	busiest_spine
	kill -0 "$jobpid" 2>/dev/null || fail "linkdown: the job ended before $SPINE went down (FAILOVER_ITERS=$ITERS: raise it)"
	link_set down
	echo "set $SPINE down in $LEAF1_NS (the spine's uplinks carried $CROSSED bytes in the job's first second)"
	sleep 1
	link_set up
	route_back || fail "linkdown: leaf1's route through $SPINE did not come back"
	wait "$jobpid" || fail "linkdown: the job failed"
	read -r fo rep <<<"$(logged linkdown)"
	echo "linkdown: $fo sub-flow failover(s), $rep replacement(s) logged"
	show_log linkdown
	[ "$CROSSED" -eq 0 ] || [ "$fo" -ge 1 ] || fail "linkdown: traffic crossed $SPINE but no sub-flow failed over"
	echo "ok: linkdown: every call completed exact with leaf1's $SPINE down for a second, then up"
}

step_single() {
	local jobpid fo rep calls k stop=$OUT/single.stop
	# Until a stop file, not a count of calls: 40 calls took less than the
	# second busiest_spine watches once jobs started faster, and a job that
	# has ended before the blackhole tests nothing.
	job single 29603 1 "-n 1000000 -x $stop" &
	jobpid=$!
	busiest_spine
	kill -0 "$jobpid" 2>/dev/null || fail "single: the job ended before $SNS was blackholed"
	blackhole "$SNS"
	echo "blackholed $SNS (its uplinks carried $CROSSED bytes in the job's first second)"
	# Dark for SINGLE_DARK_S seconds or until the sub-flow moved (then one
	# more second, calls going on over the new path).
	for ((k = 0; k < SINGLE_DARK_S * 5; k++)); do
		read -r _ rep <<<"$(logged single)"
		[ "$rep" -eq 0 ] || break
		kill -0 "$jobpid" 2>/dev/null || break
		sleep 0.2
	done
	sleep 1
	touch "$stop"
	wait "$jobpid" || fail "single: the job failed"
	calls=$(awk '{print $2}' "$OUT/single.0.out")
	echo "single: $calls calls"
	lift_all
	read -r fo rep <<<"$(logged single)"
	echo "single: $fo failover(s), $rep replacement(s) logged"
	show_log single
	[ "$CROSSED" -eq 0 ] || [ "$rep" -ge 1 ] ||
		fail "single: its one sub-flow crossed $SNS but was not replaced on a new port"
	echo "ok: single: one sub-flow, every call completed exact with $SNS dark (re-pathed)"
}

step_flap() {
	local jobpid k fo rep dups calls stop=$OUT/flap.stop hit=0 spines=""
	job flap 29604 4 "-n 1000000 -x $stop" &
	jobpid=$!
	for ((k = 0; k < FLAPS; k++)); do
		busiest_spine # the up second: which uplink of leaf1 to take down
		spines="$spines $SPINE"
		[ "$CROSSED" -eq 0 ] || hit=$((hit + 1))
		link_set down
		sleep 1
		link_set up
		kill -0 "$jobpid" 2>/dev/null || break
	done
	sleep 1
	touch "$stop"
	wait "$jobpid" || fail "flap: the job failed"
	[ "$k" -eq "$FLAPS" ] || fail "flap: the job ended after $k of $FLAPS flaps"
	calls=$(awk '{print $2}' "$OUT/flap.0.out")
	read -r fo rep <<<"$(logged flap)"
	read -r _ _ dups <<<"$(counted "$OUT"/flap.stats.*)" || fail "weft-topo --stats (flap)"
	echo "flap: leaf1's uplinks down in turn:$spines ($hit of them carrying traffic); $calls calls;" \
		"$fo failover(s), $rep replacement(s), $dups duplicate(s) dropped"
	show_log flap
	[ "$hit" -eq 0 ] || [ "$fo" -ge 1 ] || fail "flap: traffic crossed the links taken down but no sub-flow failed over"
	route_back || fail "flap: leaf1's route through $SPINE did not come back"
	echo "ok: flap: every call completed exact (no fragment reached the user twice)"
}

# Does rank R's LABEL.R.err name PEER: "peer rank PEER (host) is
# unreachable: every path to it dark ... (sub-flow N dark ...), no answer
# from it on the watch for S s"?
names_dark() {
	grep -q "peer rank $3 (.*) is unreachable: every path to it dark for .* (sub-flow [0-9] dark.*), no answer from it on the watch for [0-9.]* s" \
		"$OUT/$1.$2.err"
}
names_late() { grep -q "no progress for .* waiting for rank $3" "$OUT/$1.$2.err"; }

# dead_job LABEL PORT [tcp]: a job of 16 MiB AllReduces with WEFT_PEER_DEAD=1,
# every spine blackholed (its TCP only, with "tcp") a second in; sets SECS,
# the seconds from the blackhole to the job's end, and fails the test if
# the job succeeded.
dead_job() {
	local label=$1 port=$2 how=${3:-} ns st=0 t0 jobpid
	FABRIC_JOB_TIMEOUT=$((DEAD_TIMEOUT + 20)) fabric_run_job "$OUT" "$label" "$port" WEFT_TRANSPORTS=socket \
		WEFT_SOCKET_NSOCKS=4 WEFT_REPATH=stall WEFT_PEER_DEAD=1 WEFT_TIMEOUT="$DEAD_TIMEOUT" WEFT_DEBUG=INFO -- \
		"$BUILD/step_time" -s 16777216 -k -n 1000000 -t 600 >&2 &
	jobpid=$!
	sleep 1
	for ns in $(awk '$1 == "spine" {print $3}' "$FABRIC_STATE"); do blackhole "$ns" $how; done
	t0=$(date +%s.%N)
	wait "$jobpid" || st=$?
	SECS=$(fabric_since "$t0")
	lift_all
	[ "$st" -ne 0 ] || fail "$label: the job succeeded with every path dark"
}

step_dead() {
	local r other
	dead_job dead 29605
	echo "dead: every spine blackholed; the job ended ${SECS} s later"
	fabric_holds "$SECS < $DEAD_BOUND" || fail "dead: the job took ${SECS} s to fail (bound $DEAD_BOUND s)"
	for r in 0 1; do
		other=$((1 - r))
		grep -h "is unreachable\|no progress for" "$OUT/dead.$r.err" | head -n 1 | cut -c1-400 | sed 's/^/#   /'
		names_dark dead "$r" "$other" || {
			tail -n 5 "$OUT/dead.$r.err" | sed 's/^/#   /'
			fail "dead: rank $r does not name peer rank $other unreachable with its dark sub-flows and the watch's silence"
		}
	done
	echo "ok: dead: both ranks failed in ${SECS} s, each naming the other unreachable (dark paths, silent watch)"
}

step_alive() {
	local r other
	dead_job alive 29606 tcp
	echo "alive: every spine drops TCP; the job ended ${SECS} s later"
	fabric_holds "$SECS > $DEAD_TIMEOUT - 1" ||
		fail "alive: the job failed ${SECS} s after the paths went dark, before WEFT_TIMEOUT ($DEAD_TIMEOUT s)"
	for r in 0 1; do
		other=$((1 - r))
		grep -h "answers on the watch\|no progress for" "$OUT/alive.$r.err" | cut -c1-300 | sed 's/^/#   /'
		! grep -q "is unreachable" "$OUT/alive.$r.err" ||
			fail "alive: rank $r declared a peer unreachable that the watch hears"
		grep -q "peer rank $other: every path to it dark for .*, but it answers on the watch" "$OUT/alive.$r.err" ||
			fail "alive: rank $r does not say that rank $other's paths are dark but its watch answers"
		names_late alive "$r" "$other" || {
			tail -n 5 "$OUT/alive.$r.err" | sed 's/^/#   /'
			fail "alive: rank $r did not fail at its timeout naming rank $other"
		}
		grep -q "no progress for .* waiting for rank $other[^;]*; the paths to rank $other: [1-9] dark (\(sub-flow [0-9]\|the control socket\|the probe sub-flow\) dark [0-9.]* s (port [0-9]*, [0-9]* new sockets\{0,1\} tried)\(, and [0-9] more\)\{0,1\}); verdict: " \
			"$OUT/alive.$r.err" ||
			fail "alive: rank $r's timeout error does not name the dark paths to rank $other"
	done
	echo "ok: alive: neither rank declared the other failed while the watch heard it; both timed out in ${SECS} s"
}

for step in $STEPS; do
	case $step in nft | linkdown | single | flap | dead | alive) ;; *) fail "unknown step '$step'" ;; esac
	t=$(date +%s.%N)
	"step_$step"
	echo "# $step: $(fabric_since "$t") s"
done
[ -n "${FAILOVER_KEEP:-}" ] || rm -rf "$OUT"
echo "PASS: failover"
