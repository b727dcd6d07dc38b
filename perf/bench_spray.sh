#!/bin/bash
# bench_spray.sh — path spraying over a two-spine fabric: one sub-flow
# against several, round robin against adaptive.
#
# Usage: perf/bench_spray.sh [options] OUTDIR
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
FABRIC_DIR=$REPO/tests/fabric
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

RATE=200mbit PAIRS=5 SIZE=32M K=8 OUTDIR="" PHASE="" TRANSPORT=socket
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=${2:?}; shift 2 ;;
	--pairs) PAIRS=${2:?}; shift 2 ;;
	--size) SIZE=${2:?}; shift 2 ;;
	--k) K=${2:?}; shift 2 ;;
	--transport) TRANSPORT=${2:?}; shift 2 ;;
	--phase) PHASE=${2:?}; shift 2 ;;
	-h | --help) sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) OUTDIR=$1; shift ;;
	esac
done
[ -n "$OUTDIR" ] || { echo "usage: bench_spray.sh [options] OUTDIR"; exit 1; }
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
case $TRANSPORT in
socket | ofi) ;;
*) echo "error: --transport $TRANSPORT: expected socket or ofi"; exit 1 ;;
esac
if [ "$TRANSPORT" = ofi ] && { [ "$K" -lt 1 ] || [ "$K" -gt 8 ]; }; then
	echo "error: --k $K: ofi takes 1 to 8 endpoints"; exit 1
fi
opts=(--rate "$RATE" --pairs "$PAIRS" --size "$SIZE" --k "$K" --transport "$TRANSPORT")

if [ -z "$PHASE" ]; then
	[ -x "$BUILD/allreduce_perf" ] || { echo "error: $BUILD/allreduce_perf not built"; exit 1; }
	: >"$OUTDIR/trials.txt"
	half=$(awk -v r="$RATE" 'BEGIN {match(r, /^[0-9.]+/); printf "%g%s", substr(r, 1, RLENGTH) / 2, substr(r, RLENGTH + 1)}')
	echo "# bench_spray: 2 leaves x 1 host, 2 spines, $SIZE AllReduce, K=$K, $PAIRS pairs," \
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
port=29700
[ "$PHASE" = equal ] || port=29800
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
		echo "$PHASE $m $p $busbw $split" | tee -a "$OUTDIR/trials.txt"
	done
done
