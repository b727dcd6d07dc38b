#!/bin/bash
# uplink_probe.sh OUTDIR [RATE] — what plain TCP gets through the shaped leaf
# uplinks of perf/bench_training.sh's fabric (2 leaves x 2 hosts, tbf RATE
# both ways, default 300mbit), in the traffic pattern of the uplink bound:
# each host of leaf1 exchanges S/2 with one host of leaf2 (h1<->h3,
# h2<->h4, all four flows at once), so each uplink carries S each way,
# S = 1, 4 and 16 MiB, 7 reps each. Prints per S the median time of the
# slowest host against the bound S / rate (bench_training's "bound").
# Run from the top of the tree, as root, the machine quiet.
set -u
OUT=${1:?OUTDIR}
RATE=${2:-300mbit}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -z "${FABRIC_STATE:-}" ]; then
	exec "$REPO/tests/fabric/fabric.sh" with --leaves 2 --hosts-per-leaf 2 --spine-rate "$RATE" \
		-- "$0" "$OUT" "$RATE"
fi
ip_of() { awk -v h="$1" '$1 == "host" && $2 ~ "-"h"$" {print $4}' "$FABRIC_STATE"; }
H1=$(ip_of h1) H2=$(ip_of h2) H3=$(ip_of h3) H4=$(ip_of h4)
leaf_of() { awk -v h="$1" '$1 == "host" && $2 ~ "-"h"$" {print $5}' "$FABRIC_STATE"; }
echo "# uplink_probe: $(date -u '+%F %T'), rate $RATE, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# h1 $H1 $(leaf_of h1) <-> h3 $H3 $(leaf_of h3); h2 $H2 $(leaf_of h2) <-> h4 $H4 $(leaf_of h4)"
rate_Bps=$(awk -v r="$RATE" 'BEGIN {n = r + 0; if (r ~ /gbit/) n *= 1e9; else if (r ~ /mbit/) n *= 1e6; print n / 8}')
echo "#   S(MiB)  bound(ms)  median slowest(ms)  /bound   (reps: ms)"
for mib in 1 4 16; do
	half=$((mib * 1024 * 1024 / 2))
	t0=$(awk 'BEGIN {printf "%.3f", systime() + 3}')
	gap=$(awk -v m="$mib" 'BEGIN {print 1 + m * 0.15}')
	pids=()
	for pair in "h1 $H1 $H3" "h3 $H3 $H1" "h2 $H2 $H4" "h4 $H4 $H2"; do
		read -r h me partner <<<"$pair"
		"$REPO/tests/fabric/fabric.sh" run "$h" -- /usr/bin/python3 "$HERE/uplink_probe.py" \
			"$me" "$partner" "$half" 7 "$t0" "$gap" >"$OUT/probe.$mib.$h" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || echo "# a probe failed: $(cat "$OUT"/probe."$mib".* | head -5)"; done
	# per rep the slowest host, sorted (mawk has no asort)
	paste "$OUT/probe.$mib.h1" "$OUT/probe.$mib.h2" "$OUT/probe.$mib.h3" "$OUT/probe.$mib.h4" |
		awk '{s = $2; if ($4 > s) s = $4; if ($6 > s) s = $6; if ($8 > s) s = $8; printf "%.1f\n", s * 1e3}' |
		sort -n | awk -v m="$mib" -v r="$rate_Bps" '{t[NR] = $1; line = line " " $1} END {
			med = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
			b = m * 1048576 / r * 1e3
			printf "  %7d  %9.1f  %18.1f  %6.2f  (%s )\n", m, b, med, med / b, line
		}'
done
