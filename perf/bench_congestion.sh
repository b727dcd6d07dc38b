#!/bin/bash
# bench_congestion.sh — congestion control on the namespace test fabric
# (tests/fabric/fabric.sh): Weft's pacer against none under incast on a
# shaped, ECN-marking spine (--mode pacing), and path spraying over two
# spines, one sub-flow against several, round robin against adaptive
# (--mode spray).
#
# Usage: perf/bench_congestion.sh --mode pacing|spray [options] OUTDIR
#        perf/bench_congestion.sh --mode pacing --sweep [options] OUTDIR
#
# ---- --mode pacing
#
#   --spine-rate RATE  tbf rate of each leaf uplink, both ways (300mbit)
#   --ecn-mark PPS     CE-marking packet rate on the uplinks (24000, DESIGN.md's
#                      example: 97 % of the 24770 full frames/s of 300 Mbit,
#                      not the 92 % it says; 23500 is 95 %, the top of the
#                      issue's 90-95 %. The marker is a phantom queue: the
#                      background cannot get more of the link than it lets
#                      through unmarked)
#   --ecn-burst N      the marker's burst in packets (fabric.sh's default: 4 ms
#                      of PPS, the depth of the tbf's own bucket; DESIGN.md's
#                      example has 32, which marks bursts the tbf passes
#                      without a queue: fabric.sh says what was measured)
#   --tbf-burst BYTES  the uplinks' tbf bucket (fabric.sh's default: 4 ms of
#                      the rate, 150000 bytes at 300 Mbit); a tc size, e.g.
#                      64k, 150kb. The marker's default burst follows it
#                      (its depth in time at PPS: 42 packets for 64k)
#   --tbf-limit BYTES  the uplinks' tbf queue limit (fabric.sh's default:
#                      25 ms of the rate plus the bucket, 1087500 bytes)
#   --sweep            instead of one fabric, issue 27's grid (16): the
#                      marker's burst 32, 48, 64, 96 packets x the tbf's
#                      bucket 64k, 150k x its limit 512k, 1m, one pacing run
#                      (no spraying) per configuration on its own fabric,
#                      with the other options as given (below)
#   --sweep-only "NAME ..."  the sweep, these configurations only: names
#                      m<PACKETS>-b<BUCKET>-l<LIMIT> (the grid's are
#                      m32-b64k-l512k ... m96-b150k-l1m; others are allowed)
#   --pairs N          A/B pairs, interleaved (3)
#   --modes "A B"      WEFT_PACER values compared (off dcqcn; the first is
#                      the reference of the ratios)
#   --seconds S        foreground length per trial at most (default: 1.5 x
#                      calls x period + 30, 90 at the defaults)
#   --calls N          foreground calls (1000; a trial ends after them)
#   --fg-period P      a foreground call starts every P seconds (0.04), or
#                      at once when the one before took longer; 0: back to
#                      back
#   --env "V=X ..."    more settings for every rank of every trial
#   --stats S          each job's connection statistics every S seconds
#                      (WEFT_STATS_FILE): OUTDIR/MODE.PAIR.{bg,fg}.stats.RANK
#   --no-spray         skip the path-spraying half (--mode spray)
#
# Fabric: 2 leaves x 2 hosts (fabric.sh --ecn-mark: ECN on in the hosts,
# TSO/GSO/GRO off, CE marks above PPS on every uplink port). Per trial,
# the same 4 hosts run two jobs at once, both with WEFT_PACER=MODE:
#   background  step_time -c alltoall -s 1M  (every host sends 2 MiB per
#               call across the spine: each uplink carries 4 flows), from
#               1 s before the foreground until it ends
#   foreground  step_time -c allreduce -s 64K -p P, --calls calls (or
#               until --seconds), every call timed (p50, p99, max). On a
#               fixed schedule it offers the same load in every mode: a
#               closed loop would send more the faster its calls return,
#               and take it from the background (at 5 ms a call, a back-
#               to-back foreground alone fills most of an uplink)
# The background's throughput is taken over the foreground's run (from
# both jobs' call times, step_time -w): the time the background runs
# alone before and after does not count, so a foreground that is done
# sooner does not flatter its mode.
# while the tbf backlog of leaf1's uplink is sampled every 0.2 s and the
# CE marks of the trial are counted (fabric.sh marks, before and after),
# and the machine's 1-minute load average noted (the jobs share 2 cores
# with whatever else runs: a load above the core count means CPU, not the
# spine, may be what a trial measures). Trials go A B A B ... so that
# drift in the machine's load falls on both modes.
# OUTDIR: trials.txt (one line a trial), MODE.PAIR.{bg,fg}.* (each rank's
# output), fg-MODE-PAIR.lat (every foreground call, us), summary.txt. The
# last line: "incast p99 ratio X, throughput ratio Y" (B over A, medians
# over the pairs): the issue's target is p99 <= 1/3 and throughput >= 0.9.
# Then --mode spray OUTDIR/spray (two-spine fabrics: K=1 against K
# sprayed, round robin against adaptive with one spine at half rate), and
# the script ends with its two figure lines:
#   incast p99 ratio X, throughput ratio Y
#   spray ratio X, adaptive ratio Y
# Exit: 0 done, 1 a job failed, 77 the fabric cannot be built here.
#
# The sweep asks whether the pacer holds its targets whatever the fabric's
# marking and queueing, not only at fabric.sh's defaults (a marker as deep
# as a 150000-byte bucket): a shallow marker marks bursts the tbf passes
# without a queue, a short queue limit drops sooner. Each configuration's
# run goes to OUTDIR/sweep/NAME (as above, its log OUTDIR/sweep/NAME.log);
# a line per configuration as it ends, then OUTDIR/sweep/summary.txt: one
# row each (config, p99 of A and B, p99 ratio, throughput ratio, B's
# marks, the highest load, whether it holds p99 <= 1/3 and throughput
# >= 0.9) and the last line "sweep: N of 16 configurations hold". Its
# length: 51-66 s a configuration at --pairs 1 --calls 500 here (17 min
# for the grid), so over an hour at the defaults (3 pairs, 1000 calls).
# Exit 1 if a configuration's jobs failed (the others still run).
#
# ---- --mode spray
#
#   --rate RATE     tbf rate of every uplink of the equal fabric, and of
#                   spine 1 in the unequal one (200mbit); spine 2 of the
#                   unequal fabric gets half
#   --pairs N       interleaved trials per mode (5: round robin's figure
#                   depends on the hash's split, below, and 3 left a
#                   sitting's median to one or two lucky splits)
#   --size BYTES    AllReduce size (32M)
#   --k K           sub-flows (WEFT_SOCKET_NSOCKS) when spraying (8)
#   --transport T   socket (default) or ofi: tcp;ofi_rxm with K endpoints
#                   per rank (WEFT_OFI_EPS, at most 8) against one; ofi
#                   picks a message's endpoint from its tag, so it has no
#                   adaptive mode: only the equal fabric runs
#   --single        instead of the two fabrics below, the single flow's
#                   re-pathing (issue 27): on the unequal fabric, one
#                   sub-flow (NSOCKS=1) with WEFT_REPATH=off against
#                   stall+congestion (it probes a second port and keeps the
#                   faster); each trial's split tells which spine the flow
#                   took, its log how often the probe won. The last line:
#                   "single flow: probing gain X" — the median busbw of the
#                   probing trials that moved or were left on the slow spine
#                   over that of the trials without re-pathing whose flow
#                   hashed onto the slow spine (the issue's target: 1.5)
#
# Two fabrics, one after the other, each 2 leaves x 1 host with 2 spines
# (fabric.sh --spines 2: routed leaves, multipath routes hashed on L4), 2
# ranks one per leaf over the socket transport, build/allreduce_perf -b
# SIZE -e SIZE -n 3 -w 1, busbw (out of place, MB/s) per trial, and the bytes
# each leaf sent up each uplink (fabric.sh spines):
#   equal    both spines at RATE: K=1 (one path) vs K sprayed (adaptive)
#   unequal  spine 2 at RATE/2: K round robin vs K adaptive
# The kernel's multipath hash is seeded at random: which spine each
# sub-flow takes differs from job to job, and each trial records the
# split (up1 share of each leaf's bytes). Round robin puts 1/K of the bytes
# on every sub-flow whatever its path; adaptive follows the paths' rates.
# Round robin's busbw is bounded by its split: with a share s of a leaf's
# sub-flows on the faster spine it cannot beat min(R / s, R/2 / (1 - s)),
# which summary.txt gives per trial (32.9 MB/s for 5 of 8 at 200 Mbit,
# against 37.5 for both spines), so the adaptive ratio of a sitting says
# how well adaptive does and also how the hash happened to split rr's.
# OUTDIR: trials.txt, MODE.N.RANK.{out,err}, summary.txt; the last line:
# "spray ratio X, adaptive ratio Y" (medians: K sprayed over K=1 on the
# equal fabric, adaptive over rr on the unequal one; targets 1.6 and 1.3).
# Exit: 0 done, 1 a job failed, 77 the fabric cannot be built here.
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
FABRIC_DIR=$REPO/tests/fabric

for a in "$@"; do
	case $a in -h | --help) sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
done
MODE=""
case "${1:-} ${2:-}" in
"--mode pacing"* | "--mode spray"*) MODE=$2; shift 2 ;;
*) echo "usage: bench_congestion.sh --mode pacing|spray [options] OUTDIR"; exit 1 ;;
esac

# ---- --mode pacing

# Sample leaf1's uplink backlog (bytes) every 0.2 s into $1 until $2 exists.
sample_backlog() {
	while [ ! -e "$2" ]; do
		tc -n "$PREFIX-leaf1" -s qdisc show dev uplink |
			awk '/backlog/ {b = $2; sub(/b$/, "", b); if (b ~ /K$/) {sub(/K$/, "", b); b *= 1024}
				if (b ~ /M$/) {sub(/M$/, "", b); b *= 1048576} print b; exit}'
		sleep 0.2
	done >"$1"
}

# Bytes the leaves' uplink qdiscs (tbf) have sent toward the spine, in all.
uplink_sent() {
	local leaf
	for leaf in $(awk '$1 == "leaf" {print $2}' "$FABRIC_STATE"); do
		tc -n "$PREFIX-$leaf" -s qdisc show dev uplink | awk '/Sent/ {print $2; exit}'
	done | awk '{n += $1} END {print n + 0}'
}

# bg_during FG.when BG.when BYTES NRANKS: the background's alltoall busbw
# (GB/s) between the foreground's first start and last end, its
# completed calls interpolated between their end times.
bg_during() {
	awk -v bytes="$3" -v n="$4" 'FNR == 1 {f++}
		f == 1 {if (FNR == 1) fs = $1; fe = $2; next}
		{e[++k] = $2}
		function done(t,   i) {
			if (k == 0 || t <= e[1]) return 0
			for (i = 2; i <= k; i++) if (t <= e[i]) return i - 2 + (t - e[i-1]) / (e[i] - e[i-1])
			return k - 1
		}
		END {if (fe <= fs || k < 2) {print "0"; exit}
			printf "%.4f", (done(fe) - done(fs)) * bytes * n * (n - 1) / n / (fe - fs) / 1e9}' "$1" "$2"
}

# trial MODE PAIR PORT: one line into trials.txt.
trial() {
	local mode=$1 pair=$2 port=$3 tag="$1.$2" bgpid rc=0
	local -a env=(WEFT_PACER="$mode") bgenv=() fgenv=()
	# shellcheck disable=SC2206
	[ -z "$EXTRA" ] || env+=($EXTRA)
	if [ -n "$STATS" ]; then
		bgenv=(WEFT_STATS_INTERVAL="$STATS" WEFT_STATS_FILE="$OUTDIR/$tag.bg.stats.%r")
		fgenv=(WEFT_STATS_INTERVAL="$STATS" WEFT_STATS_FILE="$OUTDIR/$tag.fg.stats.%r")
	fi
	local m0 s0 t0
	m0=$("$FABRIC_SH" marks | awk '{n += $3} END {print n + 0}')
	s0=$(uplink_sent) t0=$(date +%s.%N)
	rm -f "$OUTDIR/$tag.done" "$OUTDIR/$tag.stop"
	(fabric_run_job "$OUTDIR" "$tag.bg" "$port" "${env[@]}" "${bgenv[@]}" -- \
		"$STEP" -c alltoall -s 1048576 -n 1000000 -t $((SECS + 30)) -x "$OUTDIR/$tag.stop" \
		-w "$OUTDIR/$tag.bg.when") >"$OUTDIR/$tag.bg.log" &
	bgpid=$!
	sleep 1
	sample_backlog "$OUTDIR/$tag.backlog" "$OUTDIR/$tag.done" &
	fabric_run_job "$OUTDIR" "$tag.fg" $((port + 1)) "${env[@]}" "${fgenv[@]}" -- \
		"$STEP" -c allreduce -s 65536 -n "$CALLS" -t "$SECS" -p "$PERIOD" -o "$OUTDIR/fg-$mode-$pair.lat" \
		-w "$OUTDIR/$tag.fg.when" >"$OUTDIR/$tag.fg.log" || rc=1
	touch "$OUTDIR/$tag.done" "$OUTDIR/$tag.stop"
	wait "$bgpid" || rc=1
	wait
	local marks fg bg bl use during
	marks=$("$FABRIC_SH" marks | awk -v m0="$m0" '{n += $3} END {print n - m0}')
	# What both jobs got through the spine: the uplinks' bytes over the
	# trial against their rate (SPINE_BPS, bytes/s per uplink).
	use=$(awk -v s0="$s0" -v s1="$(uplink_sent)" -v t0="$t0" -v t1="$(date +%s.%N)" \
		-v bps="$SPINE_BPS" -v n="$(awk '$1 == "leaf"' "$FABRIC_STATE" | wc -l)" 'BEGIN {
		printf "%.3f", (s1 - s0) / ((t1 - t0) * bps * n)}')
	fg=$(cat "$OUTDIR/$tag.fg.0.out")
	bg=$(cat "$OUTDIR/$tag.bg.0.out")
	during=$(bg_during "$OUTDIR/$tag.fg.when" "$OUTDIR/$tag.bg.when" 1048576 "$NRANKS")
	bl=$(awk '{s += $1; if ($1 > m) m = $1; n++} END {printf "%.0f %.0f", n ? s / n : 0, m}' \
		"$OUTDIR/$tag.backlog")
	echo "$mode $pair fg: $fg | bg: $bg | bg_during_fg $during | backlog_mean_max $bl | marks $marks | spine_use $use | load $(cut -d' ' -f1 /proc/loadavg)" |
		tee -a "$OUTDIR/trials.txt"
	[ "$rc" -eq 0 ] || { cat "$OUTDIR/$tag.bg.log" "$OUTDIR/$tag.fg.log"; return 1; }
}

# The incast trials on one fabric, then --mode spray (unless --no-spray),
# or with --sweep one fabric per configuration of the grid (pacing_sweep).
pacing_outer() {
	RATE=300mbit PPS=24000 BURST="" TBF_BURST="" TBF_LIMIT="" SWEEP=0 SWEEP_ONLY=""
	local out="" spray=1
	args=()
	while [ $# -gt 0 ]; do
		case $1 in
		--spine-rate) RATE=${2:?}; shift 2 ;;
		--ecn-mark) PPS=${2:?}; shift 2 ;;
		--ecn-burst) BURST=${2:?}; shift 2 ;;
		--tbf-burst) TBF_BURST=${2:?}; shift 2 ;;
		--tbf-limit) TBF_LIMIT=${2:?}; shift 2 ;;
		--sweep) SWEEP=1; shift ;;
		--sweep-only) SWEEP=1 SWEEP_ONLY=${2:?}; shift 2 ;;
		--pairs | --modes | --seconds | --calls | --env | --stats | --fg-period)
			args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
		--no-spray) spray=0; args+=("$1"); shift ;;
		-*) echo "error: --mode pacing: unknown option '$1'"; exit 1 ;;
		*) [ -z "$out" ] || { echo "error: two output directories: '$out' and '$1'"; exit 1; }
			out=$1; shift ;;
		esac
	done
	[ -n "$out" ] || { echo "usage: bench_congestion.sh --mode pacing [options] OUTDIR"; exit 1; }
	[ -f "$BUILD/libweft.so" ] || { echo "error: $BUILD/libweft.so not built"; exit 1; }
	mkdir -p "$BUILD/fabric"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -I"$REPO/include" -o "$BUILD/fabric/step_time" \
		"$HERE/step_time.c" -L"$BUILD" -lweft -Wl,-rpath,"$BUILD" || exit 1
	export BENCH_SPINE_RATE=$RATE BENCH_PPS=$PPS
	[ "$SWEEP" -eq 0 ] || pacing_sweep "$out"
	"$FABRIC_DIR/fabric.sh" with --leaves 2 --hosts-per-leaf 2 --spine-rate "$RATE" \
		${TBF_BURST:+--tbf-burst "$TBF_BURST"} ${TBF_LIMIT:+--tbf-limit "$TBF_LIMIT"} \
		--ecn-mark "$PPS" ${BURST:+--ecn-burst "$BURST"} -- "$0" --mode pacing "${args[@]}" "$out" ||
		exit $?
	[ "$spray" -eq 1 ] || exit 0
	# Then path spraying, on its own two-spine fabrics; one line each.
	env -u FABRIC_STATE "$0" --mode spray "$out/spray" >"$out/spray.log" 2>&1 ||
		{ tail -n 20 "$out/spray.log"; exit 1; }
	cat "$out/spray/summary.txt"
	echo "---"
	grep "incast p99 ratio" "$out/summary.txt" | tail -n 1 | sed 's/.*: incast/incast/'
	tail -n 1 "$out/spray/summary.txt"
	exit 0
}

# The grid of issue 27 item 7: the marker's burst (packets) x the tbf's
# bucket x its queue limit, one name a configuration: m<N>-b<SIZE>-l<SIZE>.
sweep_grid() {
	local m b l
	for m in 32 48 64 96; do
		for b in 64k 150k; do
			for l in 512k 1m; do echo "m$m-b$b-l$l"; done
		done
	done
}

# pacing_sweep OUTDIR: a pacing run (no spraying) per configuration into
# OUTDIR/sweep/NAME, on its own fabric; then the table. Exits.
pacing_sweep() {
	local out=$1 names name m b l n=0 total rc failed=0 t0
	[ -z "$BURST$TBF_BURST$TBF_LIMIT" ] ||
		{ echo "error: --sweep sets --ecn-burst, --tbf-burst and --tbf-limit itself (one fabric per configuration)"; exit 1; }
	names=${SWEEP_ONLY:-$(sweep_grid)}
	for name in $names; do
		[[ $name =~ ^m([0-9]+)-b([0-9.]+[A-Za-z]*)-l([0-9.]+[A-Za-z]*)$ ]] ||
			{ echo "error: --sweep-only: bad configuration '$name' (m<PACKETS>-b<BUCKET>-l<LIMIT>, e.g. m32-b64k-l512k)"; exit 1; }
		for b in "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"; do
			"$FABRIC_DIR/fabric.sh" size-bytes "$b" >/dev/null || { echo "error: --sweep-only: in '$name'"; exit 1; }
		done
	done
	total=$(echo "$names" | wc -w)
	mkdir -p "$out/sweep"
	for name in $names; do
		[[ $name =~ ^m([0-9]+)-b([^-]+)-l([^-]+)$ ]]
		m=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} l=${BASH_REMATCH[3]}
		n=$((n + 1)) t0=$SECONDS
		rc=0
		"$FABRIC_DIR/fabric.sh" with --leaves 2 --hosts-per-leaf 2 --spine-rate "$RATE" \
			--tbf-burst "$b" --tbf-limit "$l" --ecn-mark "$PPS" --ecn-burst "$m" -- \
			"$0" --mode pacing "${args[@]}" --no-spray "$out/sweep/$name" >"$out/sweep/$name.log" 2>&1 || rc=$?
		[ "$rc" -ne 77 ] || { tail -n 5 "$out/sweep/$name.log"; exit 77; }
		[ "$rc" -eq 0 ] || failed=$((failed + 1))
		echo "sweep $n/$total $name: $( { grep -h "incast p99 ratio" "$out/sweep/$name/summary.txt" 2>/dev/null ||
			echo "failed (exit $rc: $out/sweep/$name.log)"; } | tail -n 1) ($((SECONDS - t0)) s)"
	done
	python3 - "$out/sweep" "$names" <<'PY' | tee "$out/sweep/summary.txt"
import os, re, sys
d, names = sys.argv[1], sys.argv[2].split()
print("%-16s %6s %7s %8s %9s %9s %9s %8s %9s %6s  %s" % ("config", "marker", "bucket", "limit",
      "p99_A_ms", "p99_B_ms", "p99_ratio", "tput", "marks_B", "load", "holds"))
held, pair = 0, None
for name in names:
    m, b, lim = re.match(r"m(\d+)-b([^-]+)-l([^-]+)$", name).groups()
    try:
        text = open(os.path.join(d, name, "summary.txt")).read()
    except OSError:
        text = ""
    ratio = re.search(r"^(\S+) vs (\S+): incast p99 ratio", text, re.M)
    if not ratio:
        print("%-16s %6s %7s %8s %9s  failed: see %s.log" % (name, m, b, lim, "", name))
        continue
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 11 and f[0] in ratio.groups() and f[1].isdigit():
            rows[f[0]] = f
    pair = ratio.group(2), ratio.group(1)
    a, bm = rows[pair[0]], rows[pair[1]]
    p99, tput = float(bm[3]) / float(a[3]), float(bm[5]) / float(a[5])
    load = re.search(r"load average during the trials: [\d.]+ to ([\d.]+)", text)
    ok = p99 <= 1 / 3 and tput >= 0.9
    held += ok
    print("%-16s %6s %7s %8s %9.1f %9.1f %9.3f %8.3f %9s %6s  %s" % (name, m, b, lim,
          float(a[3]) / 1e3, float(bm[3]) / 1e3, p99, tput, bm[9], load.group(1) if load else "?",
          "yes" if ok else "no (%s)" % ", ".join(w for w, bad in (("p99", p99 > 1 / 3),
                                                                  ("throughput", tput < 0.9)) if bad)))
if pair:
    print("A = %s, B = %s; p99 and throughput (the background's while the foreground ran): B over A,"
          " medians over the pairs; marks_B: a B trial's CE marks (median); load: the highest"
          " 1-minute load average of the configuration's trials; holds: p99 <= 1/3 and throughput"
          " >= 0.9" % pair)
print("sweep: %d of %d configurations hold%s" % (held, len(names),
      "" if len(names) == 16 else " (--sweep-only: not the whole grid of 16)"))
PY
	[ "$failed" -eq 0 ] || { echo "sweep: $failed configuration(s) failed"; exit 1; }
	exit 0
}

pacing() {
	[ -n "${FABRIC_STATE:-}" ] || pacing_outer "$@"
	PAIRS=3 MODES="off dcqcn" SECS="" CALLS=1000 EXTRA="" OUTDIR="" STATS="" PERIOD=0.04
	while [ $# -gt 0 ]; do
		case $1 in
		--pairs) PAIRS=${2:?}; shift 2 ;;
		--modes) MODES=${2:?}; shift 2 ;;
		--seconds) SECS=${2:?}; shift 2 ;;
		--calls) CALLS=${2:?}; shift 2 ;;
		--env) EXTRA=${2:?}; shift 2 ;;
		--stats) STATS=${2:?}; shift 2 ;;
		--fg-period) PERIOD=${2:?}; shift 2 ;;
		--no-spray) shift ;;
		*) OUTDIR=$1; shift ;;
		esac
	done
	[ -n "$OUTDIR" ] || { echo "usage: bench_congestion.sh --mode pacing [options] OUTDIR"; exit 1; }
	[ -n "$SECS" ] || SECS=$(awk -v n="$CALLS" -v p="$PERIOD" 'BEGIN {printf "%d", 1.5 * n * p + 30}')
	# A job may run its whole length, and the background a little longer.
	export FABRIC_JOB_TIMEOUT=${FABRIC_JOB_TIMEOUT:-$((SECS + 60))}
	mkdir -p "$OUTDIR"
	OUTDIR=$(cd "$OUTDIR" && pwd)
	# shellcheck source=tests/fabric/lib.sh
	. "$FABRIC_DIR/lib.sh"
	STEP=$BUILD/fabric/step_time
	SPINE_BPS=$("$FABRIC_SH" rate-bytes "$BENCH_SPINE_RATE") || exit 1
	PREFIX=$(awk '$1 == "prefix" {print $2}' "$FABRIC_STATE")
	fabric_ranks interleaved





	: >"$OUTDIR/trials.txt"
	echo "# bench_congestion --mode pacing: spine $BENCH_SPINE_RATE, CE marks above $BENCH_PPS pkt/s" \
		"(burst $(awk '$1 == "ecn" {print $3}' "$FABRIC_STATE")), tbf bucket/limit" \
		"$(awk '$1 == "tbf" {print $5 "/" $6 " bytes"; exit}' "$FABRIC_STATE"), modes $MODES," \
		"$PAIRS pairs, ${SECS}s or $CALLS calls every ${PERIOD}s, extra: ${EXTRA:-none}" | tee "$OUTDIR/summary.txt"
	fabric_print_ranks | tee -a "$OUTDIR/summary.txt"
	port=29100
	for ((p = 1; p <= PAIRS; p++)); do
		for m in $MODES; do
			trial "$m" "$p" "$port" || exit 1
			port=$((port + 2))
		done
	done

	# Medians per mode; ratios of the later modes over the first.
	python3 - "$OUTDIR/trials.txt" "$MODES" <<'PY' | tee -a "$OUTDIR/summary.txt"
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode = line.split()[0]
    fg, bg = line.split("fg:")[1].split("| bg:")
    f = dict(re.findall(r"(\w+) ([\d.]+)", fg)); b = dict(re.findall(r"(\w+) ([\d.]+)", bg))
    bl = re.search(r"backlog_mean_max (\d+) (\d+)", line).groups()
    marks = re.search(r"marks (\d+)", line).group(1)
    use = re.search(r"spine_use ([\d.]+)", line)
    during = float(re.search(r"bg_during_fg ([\d.]+)", line).group(1))
    rows.setdefault(mode, []).append(dict(p50=float(f["p50_us"]), p99=float(f["p99_us"]),
        mx=float(f["max_us"]), calls=int(f["calls"]), bg=during, bgrun=float(b["busbw"]),
        blm=float(bl[0]), blx=float(bl[1]), marks=int(marks),
        use=float(use.group(1)) if use else 0.0))
modes = sys.argv[2].split()
med = lambda m, k: statistics.median(r[k] for r in rows[m])
loads = [float(re.search(r"load ([\d.]+)", l).group(1)) for l in open(sys.argv[1]) if "load " in l]
print("%-6s %5s %10s %10s %10s %12s %12s %12s %12s %9s %9s" % ("mode", "calls", "fg_p50_us",
      "fg_p99_us", "fg_max_us", "bg_busbw_GB", "bg_whole_GB", "backlog_avg", "backlog_max",
      "marks", "spine_use"))
for m in modes:
    print("%-6s %5d %10.0f %10.0f %10.0f %12.4f %12.4f %12.0f %12.0f %9d %9.3f" % (m,
          med(m, "calls"), med(m, "p50"), med(m, "p99"), med(m, "mx"), med(m, "bg"),
          med(m, "bgrun"), med(m, "blm"), med(m, "blx"), med(m, "marks"), med(m, "use")))
print("bg_busbw_GB: the background's while the foreground ran (the ratio's); bg_whole_GB: "
      "over its whole run")
few = [m for m in modes if min(r["calls"] for r in rows[m]) < 1000]
if few:
    print("note: fewer than 1000 foreground calls in a trial of %s (--seconds ran out)" % ", ".join(few))
if loads:
    print("load average during the trials: %.1f to %.1f (2 cores)" % (min(loads), max(loads)))
a = modes[0]
for m in modes[1:]:
    print("%s vs %s: incast p99 ratio %.2f, throughput ratio %.2f" % (m, a, med(m, "p99") / med(a, "p99"),
          med(m, "bg") / med(a, "bg")))
PY
}

# ---- --mode spray

# Two two-spine fabrics, one after the other.
# --single: the unequal fabric only, one sub-flow without and with
# re-pathing; the summary compares the trials that matter (above).
single() {
	[ -x "$BUILD/allreduce_perf" ] || { echo "error: $BUILD/allreduce_perf not built"; return 1; }
	: >"$OUTDIR/trials.txt"
	local half
	half=$(awk -v r="$RATE" 'BEGIN {match(r, /^[0-9.]+/); printf "%g%s", substr(r, 1, RLENGTH) / 2, substr(r, RLENGTH + 1)}')
	echo "# bench_congestion --mode spray --single: 2 leaves x 1 host, 2 spines ($RATE + $half)," \
		"$SIZE AllReduce, one sub-flow, WEFT_REPATH off against stall+congestion, $PAIRS pairs" |
		tee "$OUTDIR/summary.txt"
	"$FABRIC_DIR/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 \
		--spine-rate "$RATE,$half" -- "$0" "${opts[@]}" --single --phase single "$OUTDIR" || return $?
	python3 - "$OUTDIR/trials.txt" <<'PY' | tee -a "$OUTDIR/summary.txt"
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def share(r):  # the smaller up1 (fast spine) share of the two leaves
    return min(float(x) for x in r[4].split(","))
off = [r for r in rows if r[1] == "off"]
probe = [r for r in rows if r[1] == "probe"]
slow = [float(r[3]) for r in off if share(r) < 0.5]
fast = [float(r[3]) for r in off if share(r) >= 0.5]
moved = [float(r[3]) for r in probe if r[5] != "moves=0"]
stayed = [float(r[3]) for r in probe if r[5] == "moves=0"]
stuck = [float(r[3]) for r in probe if r[5] == "moves=0" and share(r) < 0.5]
med = lambda v: statistics.median(v) if v else float("nan")
print("off:   %d trials, %d on the slow spine (median %.1f MB/s), %d on the fast one (%.1f)"
      % (len(off), len(slow), med(slow), len(fast), med(fast)))
print("probe: %d trials, %d moved (median %.1f MB/s), %d did not (%.1f), %d of them left on the"
      " slow spine (%.1f)" % (len(probe), len(moved), med(moved), len(stayed), med(stayed),
                              len(stuck), med(stuck)))
# The flows that hashed onto the slow spine, as far as the logs tell: those
# that moved, and those that stayed there (a failure to move counts).
started_slow = moved + stuck
gain = med(started_slow) / med(slow) if slow and started_slow else float("nan")
print("single flow: probing gain %s" % ("n/a" if gain != gain else "%.2f" % gain))
PY
}

spray() {
	RATE=200mbit PAIRS=5 SIZE=32M K=8 OUTDIR="" PHASE="" TRANSPORT=socket
	while [ $# -gt 0 ]; do
		case $1 in
		--rate) RATE=${2:?}; shift 2 ;;
		--pairs) PAIRS=${2:?}; shift 2 ;;
		--size) SIZE=${2:?}; shift 2 ;;
		--k) K=${2:?}; shift 2 ;;
		--transport) TRANSPORT=${2:?}; shift 2 ;;
		--phase) PHASE=${2:?}; shift 2 ;;
		--single) SINGLE=1; shift ;;
		*) OUTDIR=$1; shift ;;
		esac
	done
	[ -n "$OUTDIR" ] || { echo "usage: bench_congestion.sh --mode spray [options] OUTDIR"; exit 1; }
	mkdir -p "$OUTDIR"
	OUTDIR=$(cd "$OUTDIR" && pwd)
	case $TRANSPORT in
	socket | ofi) ;;
	*) echo "error: --transport $TRANSPORT: expected socket or ofi"; exit 1 ;;
	esac
	if [ "$TRANSPORT" = ofi ] && { [ "$K" -lt 1 ] || [ "$K" -gt 8 ]; }; then
		echo "error: --k $K: ofi takes 1 to 8 endpoints"; exit 1
	fi
	opts=(--mode spray --rate "$RATE" --pairs "$PAIRS" --size "$SIZE" --k "$K" --transport "$TRANSPORT")
	if [ "${SINGLE:-0}" = 1 ] && [ -z "$PHASE" ]; then
		[ "$TRANSPORT" = socket ] || { echo "error: --single: the socket transport only"; exit 1; }
		single
		exit $?
	fi

	if [ -z "$PHASE" ]; then
		[ -x "$BUILD/allreduce_perf" ] || { echo "error: $BUILD/allreduce_perf not built"; exit 1; }
		: >"$OUTDIR/trials.txt"
		half=$(awk -v r="$RATE" 'BEGIN {match(r, /^[0-9.]+/); printf "%g%s", substr(r, 1, RLENGTH) / 2, substr(r, RLENGTH + 1)}')
		echo "# bench_congestion --mode spray: 2 leaves x 1 host, 2 spines, $SIZE AllReduce, K=$K, $PAIRS pairs," \
			"over $TRANSPORT; equal: $RATE + $RATE, unequal: $RATE + $half" | tee "$OUTDIR/summary.txt"
		"$FABRIC_DIR/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 --spine-rate "$RATE" -- \
			"$0" "${opts[@]}" --phase equal "$OUTDIR" || exit $?
		if [ "$TRANSPORT" = socket ]; then
			"$FABRIC_DIR/fabric.sh" with --leaves 2 --hosts-per-leaf 1 --spines 2 \
				--spine-rate "$RATE,$half" -- "$0" "${opts[@]}" --phase unequal "$OUTDIR" ||
				exit $?
		fi
		rate_Bps=$("$FABRIC_DIR/fabric.sh" rate-bytes "$RATE") || exit 1
		python3 - "$OUTDIR/trials.txt" "$rate_Bps" <<'PY' | tee -a "$OUTDIR/summary.txt"
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[1]), []).append((float(f[3]), " ".join(f[4:])))
print("%-8s %-9s %6s %12s   %s" % ("fabric", "mode", "trials", "busbw_MB/s", "up1 shares of each trial (leaf1,leaf2)"))
med = {}
for (fab, mode), r in rows.items():
    med[fab, mode] = statistics.median(b for b, _ in r)
    print("%-8s %-9s %6d %12.1f   %s" % (fab, mode, len(r), med[fab, mode], "; ".join(s for _, s in r)))
def ratio(a, b):
    return med[a] / med[b] if a in med and b in med and med[b] > 0 else float("nan")
sp = [m for f, m in med if f == "equal" and m != "k1"]
adaptive = ratio(("unequal", "adaptive"), ("unequal", "rr"))
# Round robin gives every sub-flow 1/K of the bytes, so with a share s of
# a leaf's sub-flows on spine 1 (at R) and 1 - s on spine 2 (at R/2) it can
# reach at most min(R / s, R/2 / (1 - s)): how far the hash's split of
# each trial let it go, against R + R/2 for a sender that follows the rates.
r1 = float(sys.argv[2]) / 1e6  # MB/s
def rr_limit(split):
    lim = []
    for s in map(float, split.split(",")):
        lim.append(min(r1 / s if s > 0 else float("inf"), r1 / 2 / (1 - s) if s < 1 else float("inf")))
    return min(lim)
if ("unequal", "rr") in rows:
    print("unequal rr: the paths' limit for each trial's split, equal bytes per sub-flow: %s MB/s"
          " (both spines: %.1f)" % ("; ".join("%.1f" % rr_limit(sp) for _, sp in rows["unequal", "rr"]),
                                    1.5 * r1))
print("spray ratio %.2f, adaptive ratio %s" % (ratio(("equal", sp[0]), ("equal", "k1")),
      "n/a" if adaptive != adaptive else "%.2f" % adaptive))
PY
		exit 0
	fi

	# --- inside a fabric: one phase ---
	# shellcheck source=tests/fabric/lib.sh
	. "$FABRIC_DIR/lib.sh"
	fabric_ranks interleaved
	if [ "$PHASE" = equal ] && [ "$TRANSPORT" = ofi ]; then
		modes=(k1 rr)
	elif [ "$PHASE" = equal ]; then
		modes=(k1 adaptive)
	else
		modes=(rr adaptive)
	fi
	if [ "$PHASE" = single ]; then
		modes=(off probe)
	fi
	port=29700
	[ "$PHASE" = equal ] || port=29800
	[ "$PHASE" != single ] || port=29900
	uplinks() { "$FABRIC_SH" spines | awk '{print $1, $2, $4}'; }
	for ((p = 1; p <= PAIRS; p++)); do
		for m in "${modes[@]}"; do
			case $TRANSPORT/$m in
			socket/k1) env=(WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS=1) ;;
			socket/rr) env=(WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS="$K" WEFT_SPRAY=rr) ;;
			socket/adaptive)
				env=(WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS="$K" WEFT_SPRAY=adaptive) ;;
			ofi/k1) env=(WEFT_TRANSPORTS=ofi "WEFT_OFI_PROVIDER=tcp;ofi_rxm" WEFT_OFI_EPS=1) ;;
			ofi/*) env=(WEFT_TRANSPORTS=ofi "WEFT_OFI_PROVIDER=tcp;ofi_rxm" WEFT_OFI_EPS="$K") ;;
			socket/off | socket/probe)
				env=(WEFT_TRANSPORTS=socket WEFT_SOCKET_NSOCKS=1 WEFT_DEBUG=INFO
					WEFT_DEBUG_SUBSYS=NET) ;;&
			socket/off) env+=(WEFT_REPATH=off) ;;
			socket/probe) env+=(WEFT_REPATH=stall+congestion) ;;
			esac
			before=$(uplinks)
			fabric_run_job "$OUTDIR" "$PHASE-$m.$p" "$port" "${env[@]}" -- \
				"$BUILD/allreduce_perf" -b "$SIZE" -e "$SIZE" -n 3 -w 1 >/dev/null || exit 1
			port=$((port + 1))
			out=$OUTDIR/$PHASE-$m.$p.0.out
			grep -q "Out of bounds values : 0 OK" "$out" || { echo "wrong results: $out"; exit 1; }
			# busbw = algbw at np=2: bytes over the out-of-place time (us), in MB/s.
			busbw=$(awk '/^ *[0-9]+ +[0-9]+ +float/ {printf "%.1f", $1 / $6; exit}' "$out")
			split=$(awk 'NR == FNR {b[$1 " " $2] = $3; next}
				{d = $3 - b[$1 " " $2]; tot[$1] += d; if ($2 == "up1") u[$1] = d}
				END {printf "%.2f,%.2f", u["leaf1"] / tot["leaf1"], u["leaf2"] / tot["leaf2"]}' \
				<(echo "$before") <(uplinks))
			if [ "$PHASE" = single ]; then
				moves=$(cat "$OUTDIR/$PHASE-$m.$p".*.err | grep -c "moving to the probe's path")
				split="$split moves=$moves"
			fi
			echo "$PHASE $m $p $busbw $split" | tee -a "$OUTDIR/trials.txt"
		done
	done
}

"$MODE" "$@"
