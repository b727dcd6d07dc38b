#!/bin/bash
# bench_pacing.sh — Weft's congestion pacer (WEFT_PACER) against none, under
# incast on a shaped, ECN-marking spine.
#
# Usage: tests/fabric/bench_pacing.sh [options] OUTDIR
#   --spine-rate RATE  tbf rate of each leaf uplink, both ways (300mbit)
#   --ecn-mark PPS     CE-marking packet rate on the uplinks (24000: 92 % of
#                      300 Mbit at 1500-byte frames)
#   --pairs N          A/B pairs, interleaved (3)
#   --modes "A B"      WEFT_PACER values compared (off dcqcn; the first is
#                      the reference of the ratios)
#   --seconds S        foreground length per trial (20)
#   --calls N          foreground calls at most (1000)
#   --env "V=X ..."    more settings for every rank of every trial
#   --no-spray         skip the path-spraying half (bench_spray.sh)
#
# Fabric: 2 leaves x 2 hosts (fabric.sh --ecn-mark: ECN on in the hosts,
# TSO/GSO/GRO off, CE marks above PPS on every uplink port). Per trial,
# the same 4 hosts run two jobs at once, both with WEFT_PACER=MODE:
#   background  step_time -c alltoall -s 1M  (every host sends 2 MiB per
#               call across the spine: each uplink carries 4 flows)
#   foreground  step_time -c allreduce -s 64K, up to --calls calls or
#               --seconds, every call timed (p50, p99, max)
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
# Then bench_spray.sh OUTDIR/spray (two-spine fabrics: K=1 against K
# sprayed, round robin against adaptive with one spine at half rate), and
# the script ends with its two figure lines:
#   incast p99 ratio X, throughput ratio Y
#   spray ratio X, adaptive ratio Y
# Exit: 0 done, 1 a job failed, 77 the fabric cannot be built here.
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

if [ -z "${FABRIC_STATE:-}" ]; then
	RATE=300mbit PPS=24000
	args=()
	while [ $# -gt 0 ]; do
		case $1 in
		--spine-rate) RATE=${2:?}; shift 2 ;;
		--ecn-mark) PPS=${2:?}; shift 2 ;;
		-h | --help) sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
		*) args+=("$1"); shift ;;
		esac
	done
	[ -f "$BUILD/libweft.so" ] || { echo "error: $BUILD/libweft.so not built"; exit 1; }
	mkdir -p "$BUILD/fabric"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -I"$REPO/include" -o "$BUILD/fabric/step_time" \
		"$HERE/step_time.c" -L"$BUILD" -lweft -Wl,-rpath,"$BUILD" || exit 1
	export BENCH_SPINE_RATE=$RATE BENCH_PPS=$PPS
	out="" spray=1
	for a in "${args[@]}"; do
		case $a in --no-spray) spray=0 ;; -*) ;; *) out=$a ;; esac
	done
	"$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 2 --spine-rate "$RATE" \
		--ecn-mark "$PPS" -- "$0" "${args[@]}" || exit $?
	[ "$spray" -eq 1 ] || exit 0
	# Then path spraying, on its own two-spine fabrics; one line each.
	env -u FABRIC_STATE "$HERE/bench_spray.sh" "$out/spray" >"$out/spray.log" 2>&1 ||
		{ tail -n 20 "$out/spray.log"; exit 1; }
	cat "$out/spray/summary.txt"
	echo "---"
	grep "incast p99 ratio" "$out/summary.txt" | tail -n 1 | sed 's/.*: incast/incast/'
	tail -n 1 "$out/spray/summary.txt"
	exit 0
fi

PAIRS=3 MODES="off dcqcn" SECS=20 CALLS=1000 EXTRA="" OUTDIR=""
while [ $# -gt 0 ]; do
	case $1 in
	--pairs) PAIRS=${2:?}; shift 2 ;;
	--modes) MODES=${2:?}; shift 2 ;;
	--seconds) SECS=${2:?}; shift 2 ;;
	--calls) CALLS=${2:?}; shift 2 ;;
	--env) EXTRA=${2:?}; shift 2 ;;
	--no-spray) shift ;;
	*) OUTDIR=$1; shift ;;
	esac
done
[ -n "$OUTDIR" ] || { echo "usage: bench_pacing.sh [options] OUTDIR"; exit 1; }
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
# shellcheck source=tests/fabric/lib.sh
. "$HERE/lib.sh"
STEP=$BUILD/fabric/step_time
PREFIX=$(awk '$1 == "prefix" {print $2}' "$FABRIC_STATE")
fabric_ranks interleaved

# Sample leaf1's uplink backlog (bytes) every 0.2 s into $1 until $2 exists.
sample_backlog() {
	while [ ! -e "$2" ]; do
		tc -n "$PREFIX-leaf1" -s qdisc show dev uplink |
			awk '/backlog/ {b = $2; sub(/b$/, "", b); if (b ~ /K$/) {sub(/K$/, "", b); b *= 1024}
				if (b ~ /M$/) {sub(/M$/, "", b); b *= 1048576} print b; exit}'
		sleep 0.2
	done >"$1"
}

# trial MODE PAIR PORT: one line into trials.txt.
trial() {
	local mode=$1 pair=$2 port=$3 tag="$1.$2" bgpid rc=0
	local -a env=(WEFT_PACER="$mode")
	# shellcheck disable=SC2206
	[ -z "$EXTRA" ] || env+=($EXTRA)
	local m0
	m0=$("$FABRIC_SH" marks | awk '{n += $3} END {print n + 0}')
	(fabric_run_job "$OUTDIR" "$tag.bg" "$port" "${env[@]}" -- \
		"$STEP" -c alltoall -s 1048576 -n 1000000 -t $((SECS + 3))) >"$OUTDIR/$tag.bg.log" &
	bgpid=$!
	sleep 1
	rm -f "$OUTDIR/$tag.done"
	sample_backlog "$OUTDIR/$tag.backlog" "$OUTDIR/$tag.done" &
	fabric_run_job "$OUTDIR" "$tag.fg" $((port + 1)) "${env[@]}" -- \
		"$STEP" -c allreduce -s 65536 -n "$CALLS" -t "$SECS" -o "$OUTDIR/fg-$mode-$pair.lat" \
		>"$OUTDIR/$tag.fg.log" || rc=1
	touch "$OUTDIR/$tag.done"
	wait "$bgpid" || rc=1
	wait
	local marks fg bg bl
	marks=$("$FABRIC_SH" marks | awk -v m0="$m0" '{n += $3} END {print n - m0}')
	fg=$(cat "$OUTDIR/$tag.fg.0.out")
	bg=$(cat "$OUTDIR/$tag.bg.0.out")
	bl=$(awk '{s += $1; if ($1 > m) m = $1; n++} END {printf "%.0f %.0f", n ? s / n : 0, m}' \
		"$OUTDIR/$tag.backlog")
	echo "$mode $pair fg: $fg | bg: $bg | backlog_mean_max $bl | marks $marks | load $(cut -d' ' -f1 /proc/loadavg)" |
		tee -a "$OUTDIR/trials.txt"
	[ "$rc" -eq 0 ] || { cat "$OUTDIR/$tag.bg.log" "$OUTDIR/$tag.fg.log"; return 1; }
}

: >"$OUTDIR/trials.txt"
echo "# bench_pacing: spine $BENCH_SPINE_RATE, CE marks above $BENCH_PPS pkt/s, modes $MODES," \
	"$PAIRS pairs, ${SECS}s or $CALLS calls, extra: ${EXTRA:-none}" | tee "$OUTDIR/summary.txt"
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
    rows.setdefault(mode, []).append(dict(p50=float(f["p50_us"]), p99=float(f["p99_us"]),
        mx=float(f["max_us"]), calls=int(f["calls"]), bg=float(b["busbw"]),
        blm=float(bl[0]), blx=float(bl[1]), marks=int(marks)))
modes = sys.argv[2].split()
med = lambda m, k: statistics.median(r[k] for r in rows[m])
loads = [float(re.search(r"load ([\d.]+)", l).group(1)) for l in open(sys.argv[1]) if "load " in l]
print("%-6s %5s %10s %10s %10s %12s %12s %12s %9s" % ("mode", "calls", "fg_p50_us", "fg_p99_us",
      "fg_max_us", "bg_busbw_GB", "backlog_avg", "backlog_max", "marks"))
for m in modes:
    print("%-6s %5d %10.0f %10.0f %10.0f %12.4f %12.0f %12.0f %9d" % (m, med(m, "calls"),
          med(m, "p50"), med(m, "p99"), med(m, "mx"), med(m, "bg"), med(m, "blm"), med(m, "blx"),
          med(m, "marks")))
if loads:
    print("load average during the trials: %.1f to %.1f (2 cores)" % (min(loads), max(loads)))
a = modes[0]
for m in modes[1:]:
    print("%s vs %s: incast p99 ratio %.2f, throughput ratio %.2f" % (m, a, med(m, "p99") / med(a, "p99"),
          med(m, "bg") / med(a, "bg")))
PY
