# shellcheck shell=bash
# lib.sh — helpers for scripts that run Weft jobs on a fabric.sh fabric.
# Source it inside `fabric.sh with ... -- SCRIPT` (FABRIC_STATE set).
#
#   fabric_ranks MODE [R]   fill RANK_HOST/IP/LEAF/SOCK/IF, one entry per rank,
#                           R ranks per host (default 1); MODE interleaved:
#                           rank numbers round-robin over the leaves (rank 0
#                           on leaf1's 1st host, rank 1 on leaf2's 1st host,
#                           ...), every host once before any twice; blocked:
#                           leaf by leaf (leaf1's hosts first), a host's R
#                           ranks consecutive, the order a leaf-aware ring
#                           would pick
#   fabric_run_job OUTDIR LABEL PORT [VAR=VALUE ...] -- CMD ARGS...
#                           one process per rank in its host's namespace:
#                           env WEFT_RANK WEFT_NRANKS WEFT_ROOT WEFT_SECRET
#                           WEFT_SOCKET_IFNAME FI_TCP_IFACE (the host's veth)
#                           WEFT_LLDP_SOCKET [VARS] CMD;
#                           output in OUTDIR/LABEL.RANK.out/.err; fails if a
#                           rank fails or runs longer than FABRIC_JOB_TIMEOUT s
#   fabric_throttle RANK on|off
#                           shape RANK's host link to 75 Mbit/s both ways (tbf
#                           on the host's eth0 and on its leaf's swp1, the
#                           port of the leaf's first host: the slow-link
#                           scripts put one host on a leaf), offloads off so
#                           tbf sees wire-size packets; off removes it.
#                           Fails if tc does
#   fabric_since T0         seconds from T0 (a `date +%s.%N`) to now, 3 decimals
#   fabric_holds EXPR       true when the comparison EXPR holds ("1.5 < 4");
#                           awk, not bc (not in every base system)
# shellcheck disable=SC2034  # the RANK_* arrays are for the caller

FABRIC_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FABRIC_SH=${FABRIC_SH:-$FABRIC_LIB_DIR/fabric.sh}
FABRIC_JOB_TIMEOUT=${FABRIC_JOB_TIMEOUT:-120}

fabric_since() {
	awk -v t0="$1" -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", now - t0 }'
}

fabric_holds() {
	awk "BEGIN { exit !($1) }"
}

fabric_ranks() {
	local mode=${1:-interleaved} per=${2:-1} j k leaf line added name ip lf sock ifname
	local -a leaves hosts=()
	case $per in '' | *[!0-9]* | 0) echo "fabric_ranks: ranks per host '$per'" >&2; return 1 ;; esac
	mapfile -t leaves < <(awk '$1 == "leaf" {print $2}' "$FABRIC_STATE")
	RANK_HOST=() RANK_IP=() RANK_LEAF=() RANK_SOCK=() RANK_IF=()
	# The hosts in the mode's order: leaf by leaf, or round robin over the leaves.
	if [ "$mode" = blocked ]; then
		for leaf in "${leaves[@]}"; do
			while read -r line; do
				read -r _ _ _ _ lf _ _ <<<"$line"
				[ "$lf" = "$leaf" ] && hosts+=("$line")
			done < <(grep '^host ' "$FABRIC_STATE")
		done
	else
		for ((j = 0; ; j++)); do
			added=0
			for leaf in "${leaves[@]}"; do
				line=$(awk -v l="$leaf" -v j="$j" \
					'$1 == "host" && $5 == l {if (n++ == j) print}' "$FABRIC_STATE")
				[ -n "$line" ] || continue
				hosts+=("$line")
				added=1
			done
			[ "$added" -eq 1 ] || break
		done
	fi
	# Blocked: the ranks of a host are consecutive. Interleaved: one rank on
	# every host in that order, then the next round (rank r on host r mod H).
	local nh=${#hosts[@]}
	for ((k = 0; k < nh * per; k++)); do
		if [ "$mode" = blocked ]; then j=$((k / per)); else j=$((k % nh)); fi
		read -r _ name _ ip lf sock ifname <<<"${hosts[j]}"
		RANK_HOST+=("$name") RANK_IP+=("$ip") RANK_LEAF+=("$lf")
		RANK_SOCK+=("$sock") RANK_IF+=("$ifname")
	done
	NRANKS=${#RANK_HOST[@]}
	FABRIC_SECRET=$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
}

fabric_print_ranks() {
	local r
	for ((r = 0; r < NRANKS; r++)); do
		echo "#   rank $r  ${RANK_HOST[r]}  ${RANK_IP[r]}  ${RANK_LEAF[r]}  ${RANK_IF[r]}"
	done
}

fabric_throttle() {
	local hns lns ns dev ns_dev rc=0
	hns=$(awk -v h="${RANK_HOST[$1]}" '$1 == "host" && $2 == h {print $3}' "$FABRIC_STATE")
	lns=$(awk -v l="${RANK_LEAF[$1]}" '$1 == "leaf" && $2 == l {print $3}' "$FABRIC_STATE")
	for ns_dev in "$hns eth0" "$lns swp1"; do
		read -r ns dev <<<"$ns_dev"
		if [ "$2" = on ]; then
			ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off >/dev/null 2>&1
			tc -n "$ns" qdisc replace dev "$dev" root tbf rate 75mbit burst 32768 limit 266000 ||
				{ echo "fabric_throttle: tbf on $dev in $ns failed" >&2; rc=1; }
		else
			tc -n "$ns" qdisc del dev "$dev" root ||
				{ echo "fabric_throttle: tc qdisc del on $dev in $ns failed" >&2; rc=1; }
		fi
	done
	return $rc
}

FABRIC_PIDS=()
fabric_kill_ranks() {
	local p
	for p in "${FABRIC_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	FABRIC_PIDS=()
}

fabric_run_job() {
	local out=$1 label=$2 port=$3 r rc=0 st t=$SECONDS
	shift 3
	local -a extra=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		extra+=("$1")
		shift
	done
	shift
	FABRIC_PIDS=()
	for ((r = 0; r < NRANKS; r++)); do
		timeout -k 5 "$FABRIC_JOB_TIMEOUT" "$FABRIC_SH" run "${RANK_HOST[r]}" -- \
			env WEFT_RANK="$r" WEFT_NRANKS="$NRANKS" WEFT_ROOT="${RANK_IP[0]}:$port" \
			WEFT_SECRET="$FABRIC_SECRET" WEFT_SOCKET_IFNAME="${RANK_IF[r]}" \
			FI_TCP_IFACE="${RANK_IF[r]}" \
			WEFT_LLDP_SOCKET="${RANK_SOCK[r]}" "${extra[@]}" "$@" \
			>"$out/$label.$r.out" 2>"$out/$label.$r.err" &
		FABRIC_PIDS+=($!)
	done
	for ((r = 0; r < NRANKS; r++)); do
		st=0
		wait "${FABRIC_PIDS[r]}" || st=$?
		if [ "$st" -ne 0 ]; then
			[ "$st" -ne 124 ] || echo "# $label: rank $r timed out after ${FABRIC_JOB_TIMEOUT}s"
			echo "# $label: rank $r exited $st; stderr:"
			tail -n 20 "$out/$label.$r.err" | sed 's/^/#   /'
			rc=1
		fi
	done
	FABRIC_PIDS=()
	echo "# $label: $((SECONDS - t))s"
	return "$rc"
}
