#!/bin/bash
# probe_marks.sh — what the fabric's CE marker does to one TCP flow the
# kernel paces at a fixed rate, with no controller reacting to the marks.
#
# Usage: tests/fabric/probe_marks.sh [--ecn-burst N] [--rates "R ..."]
#   --ecn-burst N   the marker's burst (fabric.sh's default otherwise)
#   --rates "R ..." pacing rates in bytes/s, 0 unpaced (5e6 10e6 20e6 30e6 0)
#
# Fabric: fabric.sh --leaves 2 --hosts-per-leaf 2 --spine-rate 300mbit
# --ecn-mark 24000 (perf/bench_congestion.sh --mode pacing's). For each rate, h1 sends to h3
# across the spine for 4 s (paced_flow.py, SO_MAX_PACING_RATE), and the
# line says the rate reached, the packets leaf1's uplink sent, the marks
# every rule made, and their ratio. A marker that stands for the queue
# marks a flow below the marking rate (36 MB/s of full frames) not at all.
# Exit: 0 done, 1 error, 77 the fabric cannot be built here.
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3

if [ -z "${FABRIC_STATE:-}" ]; then
	burst=() rates="5e6 10e6 20e6 30e6 0"
	while [ $# -gt 0 ]; do
		case $1 in
		--ecn-burst) burst=(--ecn-burst "${2:?}"); shift 2 ;;
		--rates) rates=${2:?}; shift 2 ;;
		-h | --help) sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
		*) echo "probe_marks.sh: unknown option '$1'"; exit 1 ;;
		esac
	done
	[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
	export PROBE_RATES=$rates
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 2 --spine-rate 300mbit \
		--ecn-mark 24000 "${burst[@]}" -- "$0"
fi

F=$HERE/fabric.sh
prefix=$(awk '$1 == "prefix" {print $2}' "$FABRIC_STATE")
dst=$(awk '$1 == "host" && $2 ~ /-h3$/ {print $4}' "$FABRIC_STATE")
echo "# marker: $(awk '$1 == "ecn" {print $2 " packets/s, burst " $3}' "$FABRIC_STATE")"
"$F" run h3 -- "$PY" "$HERE/paced_flow.py" serve "$dst" 5001 &
server=$!
trap 'kill "$server" 2>/dev/null' EXIT
sleep 1
marks() { "$F" marks | awk '{n += $3} END {print n + 0}'; }
sent() { tc -n "$prefix-leaf1" -s qdisc show dev uplink | awk '/Sent/ {print $4; exit}'; }
printf "%-10s %8s %9s %8s %7s\n" rate_Bps MB/s packets marks marked
for r in $PROBE_RATES; do
	m0=$(marks) p0=$(sent)
	mbs=$("$F" run h1 -- "$PY" "$HERE/paced_flow.py" send "$dst" 5001 "$r" 4) || exit 1
	m1=$(marks) p1=$(sent)
	awk -v r="$r" -v s="$mbs" -v p=$((p1 - p0)) -v m=$((m1 - m0)) \
		'BEGIN {printf "%-10s %8s %9d %8d %7.3f\n", r, s, p, m, p ? m / p : 0}'
done
