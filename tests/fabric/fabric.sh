#!/bin/bash
# fabric.sh — a leaf/spine test fabric built from Linux network namespaces.
#
# Every host is a network namespace (PREFIX-h1, PREFIX-h2, ...) with one veth
# (eth0) plugged into a port (swpN) of a Linux bridge that lives in its leaf
# switch's namespace (PREFIX-leaf1, ...). Each leaf has an uplink veth (uplink)
# to a port of the spine's bridge (PREFIX-spine). One L2 domain, one private /24
# per fabric (10.77.X.0/24, X derived from the prefix), hosts at .11, .12, ...
# Addresses exist only inside these namespaces. With --spine-rate the uplinks
# are shaped with tbf in both directions; host links are left unshaped.
#
# With --ecn-mark PPS (congestion marking, for the pacer): every host turns
# ECN on (net.ipv4.tcp_ecn=1) and TSO/GSO/GRO off on its veth (ethtool -K),
# so that packets cross the fabric at wire size and marks land per packet;
# each leaf's bridge marks CE on ECN-capable packets leaving its uplink
# above PPS packets per second, and the spine's bridge does the same on the
# ports toward the leaves (nftables, table bridge weft_ecn:
# `oifname "uplink" ip ecn ect0 limit rate over PPS/second burst B packets
# counter ip ecn set ce`). nftables cannot see the tbf queue, so the packet
# rate stands in for it: set PPS at 90-95 % of the bottleneck's packet rate
# (300 Mbit/s carries 24770 full frames/s, 1500 bytes of IP and the 14 of
# Ethernet that tbf counts: 24000/s is 97 %, 23500/s 95 %, 22800/s 92 %). `fabric.sh marks`
# prints the packets each rule marked.
# The marker's burst B (--ecn-burst) is by default 4 ms of PPS, at least 22
# packets: the same depth as the tbf's own bucket (4 ms of its rate, at
# least 32 KiB; see shape), so the marker starts marking where the tbf
# would start to queue at the marking rate. With --tbf-burst BYTES the
# default follows that bucket instead: its depth in time at the (first)
# spine rate, times PPS (round(BYTES x PPS / rate in bytes/s), at least 1:
# 64 KiB at 300 Mbit and 24000/s is 42 packets); an explicit --ecn-burst
# always wins. A shallower marker marks what
# the tbf passes without a queue: packets reach the bridge in bursts of
# the senders' and softirqs' scheduling, so with DESIGN.md's example of 32
# a single flow paced at 5 MB/s (14 % of 300 Mbit, 3400 packets/s) had 4-8 %
# of its packets marked, 10 MB/s 14-22 %, 20 MB/s 27-28 %; at the default
# (96 at 24000/s) none of them was, and an unpaced flow at the tbf's rate
# about 4 % (tests/fabric/probe_marks.sh [--ecn-burst 32] measures it).
#
# With --spines S (S >= 2) the fabric is routed instead, as a fat tree's
# ECMP is: S spines, every leaf a router with one uplink per spine and a
# multipath route per other leaf hashed on L4 ports, each leaf's hosts in
# their own /24 (fabric_routed.sh says how; --spine-rate R1,R2,... shapes
# each spine's links at its own rate). `fabric.sh spines` prints the bytes
# each leaf has sent up each uplink.
#
# lldpd runs on every leaf (system name leaf1, leaf2, ... on its host-facing
# ports swpN, bridge capability) and on every host (system name = host
# namespace name, on eth0), each with its own control socket, tx-interval
# 500ms, tx-hold 20 (TTL 10 s, so a busy CPU does not age neighbours out), port
# ids = interface names. `up` returns once every host sees its leaf and every
# leaf its hosts (bounded by --timeout, default 15 s).
# `down` ends the lldpd PIDs it recorded (checking their start time), then any
# process still inside its namespaces (e.g. a rank of a failed test), then
# deletes the namespaces, sockets, logs and the state file.
#
# The uplinks' tbf (--spine-rate) has by default a bucket (burst) of 4 ms
# of its rate, at least 32 KiB, and a queue limit of 25 ms of its rate plus
# the bucket (at 300 Mbit: 150000 and 1087500 bytes). --tbf-burst BYTES and
# --tbf-limit BYTES set them instead, on every shaped uplink (both ways,
# every spine); a --tbf-burst without --tbf-limit keeps the limit's rule,
# 25 ms of the rate plus the new bucket. BYTES as tc reads a size: a plain
# number of bytes, or with a suffix b, k or kb (1024), m or mb (1048576),
# e.g. 64k, 150kb, 0.5m; the bucket at least one full frame (1514) and at
# most 64m, the limit 1514 to 256m. `fabric.sh size-bytes SIZE` converts.
#
# Usage:
#   fabric.sh up   [--leaves L] [--hosts-per-leaf H] [--spine-rate RATE]
#                  [--tbf-burst BYTES] [--tbf-limit BYTES]
#                  [--ecn-mark PPS [--ecn-burst PACKETS]] [--spines S]
#                  [--prefix NAME] [--state FILE]
#                  [--timeout SECS]
#   fabric.sh down [--prefix NAME | --state FILE]      (idempotent)
#   fabric.sh run  [--prefix NAME | --state FILE] HOST -- CMD [ARGS...]
#   fabric.sh with [up options] -- CMD [ARGS...]
#                  up, run CMD with FABRIC_STATE exported, always down;
#                  returns CMD's status (77 if the fabric cannot be built here)
#   fabric.sh show [--prefix NAME | --state FILE]      (print the layout)
#   fabric.sh marks [--prefix NAME | --state FILE]
#                  CE marks per switch port so far (with --ecn-mark)
#   fabric.sh spines [--prefix NAME | --state FILE]
#                  bytes each leaf sent up each uplink: "LEAF UPLINK SPINE BYTES"
#                  (--spines)
#   fabric.sh rate-bytes RATE
#                  a tc rate (300mbit, 1gbit, 10mbps ...) in bytes per second
#   fabric.sh size-bytes SIZE
#                  a tc size (64k, 150kb, 0.5m, 1514 ...) in bytes
#
# Without --prefix/--state, down/run/show use $FABRIC_STATE.
# HOST is a host's name (its namespace, e.g. wf123-h1), its short name (h1) or
# its number (1). `run` executes CMD inside the host's namespace (and in its own
# UTS namespace with the host name set, when unshare is available), with
#   FABRIC_HOST FABRIC_IP FABRIC_IFNAME FABRIC_LEAF FABRIC_LLDP_SOCKET
# set, and WEFT_SOCKET_IFNAME / WEFT_LLDP_SOCKET defaulted to the host's veth and
# lldpd socket.
#
# State file (default /tmp/weft-fabric-PREFIX.state), one record a line,
# appended as things are created so that `down` can undo a partial `up`:
#   prefix PREFIX
#   subnet 10.77.X            (the /24, without the last octet)
#   dir DIR                   (sockets, lldpd configs and logs)
#   ns NAMESPACE              (every namespace created)
#   pid PID NAMESPACE STARTTIME   (every lldpd started; STARTTIME from /proc)
#   uplink LEAF LEAFNS IF SPINENS IF RATE
#   tbf NS IF RATE BURST LIMIT    (every shaped port: its bucket and limit, bytes)
#   ecn PPS BURST             (--ecn-mark: switches that mark, hosts with ECN on)
#   leaf LEAF NS SOCK
#   host NAME NS IP LEAF SOCK IFNAME
#   ready
#
# Exit status: 0 ok, 1 error, 77 cannot run here (not root, missing tools).
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

FABRIC_SH=$(readlink -f "$0")
SELF=$FABRIC_SH
HOST_IF=eth0
UPLINK_IF=uplink
TX_INTERVAL=500ms
TX_HOLD=20 # TTL = 20 x 500 ms = 10 s: survives a busy CPU during a benchmark

# shellcheck source=tests/fabric/ns_common.sh
. "$(dirname "$FABRIC_SH")/ns_common.sh"

# ---------------------------------------------------------------------------
# Prerequisites

check_prereqs() {
	[ "$(id -u)" -eq 0 ] || skip "fabric needs root (network namespaces)"
	local t
	for t in ip tc lldpd lldpcli; do
		command -v "$t" >/dev/null 2>&1 || skip "'$t' not found (install iproute2 / lldpd)"
	done
	getent passwd _lldpd >/dev/null 2>&1 ||
		skip "lldpd's privilege-separation user _lldpd is missing"
	# Can we create a namespace at all (e.g. inside an unprivileged container)?
	local probe="wfprobe$$"
	ip netns add "$probe" >/dev/null 2>&1 || skip "'ip netns add' is not permitted here"
	ip netns del "$probe" >/dev/null 2>&1
}

# ---------------------------------------------------------------------------
# State file

STATE=""
PREFIX=""

state_default() { echo "/tmp/weft-fabric-$1.state"; }


# Resolve STATE from --prefix/--state/$FABRIC_STATE.
resolve_state() {
	if [ -z "$STATE" ]; then
		if [ -n "$PREFIX" ]; then
			STATE=$(state_default "$PREFIX")
		elif [ -n "${FABRIC_STATE:-}" ]; then
			STATE=$FABRIC_STATE
		else
			die "no fabric given: use --prefix NAME, --state FILE or FABRIC_STATE"
		fi
	fi
}

# ---------------------------------------------------------------------------
# up

# tc rate -> bytes per second (integer)
rate_bytes() {
	awk -v r="$1" 'BEGIN {
		if (!match(r, /^[0-9.]+/)) exit 1
		v = substr(r, 1, RLENGTH) + 0; u = tolower(substr(r, RLENGTH + 1))
		if (u == "" || u == "bit") m = 1 / 8
		else if (u == "kbit") m = 1000 / 8
		else if (u == "mbit") m = 1000000 / 8
		else if (u == "gbit") m = 1000000000 / 8
		else if (u == "tbit") m = 1000000000000 / 8
		else if (u == "bps") m = 1
		else if (u == "kbps") m = 1000
		else if (u == "mbps") m = 1000000
		else if (u == "gbps") m = 1000000000
		else exit 1
		printf "%d\n", v * m
	}'
}

# tc size (bytes, k/kb = 1024, m/mb = 1048576, as tc reads them) -> bytes
size_bytes() {
	awk -v s="$1" 'BEGIN {
		if (!match(s, /^[0-9]+(\.[0-9]+)?/)) exit 1
		v = substr(s, 1, RLENGTH) + 0; u = tolower(substr(s, RLENGTH + 1))
		if (u == "" || u == "b") m = 1
		else if (u == "k" || u == "kb") m = 1024
		else if (u == "m" || u == "mb") m = 1048576
		else exit 1
		printf "%d\n", v * m
	}'
}

# tbf_size OPTION VALUE MAX: VALUE (a tc size) in bytes, between one full
# frame and MAX bytes; dies naming OPTION and VALUE otherwise.
tbf_size() {
	local b
	b=$(size_bytes "$2") || die "$1: bad size '$2' (bytes, or with k, kb, m or mb: e.g. 64k, 0.5m)"
	[ "$b" -ge 1514 ] || die "$1 '$2' is $b bytes: at least one full frame (1514)"
	[ "$b" -le "$3" ] || die "$1 '$2' is $b bytes: at most $3"
	echo "$b"
}

# Turn segmentation/receive offloads off on a veth, so tbf sees wire-size
# packets. ethtool if present; otherwise cap the GSO/GRO size with ip(8).
NOTED_ETHTOOL=0
no_offload() {
	local ns=$1 dev=$2
	if command -v ethtool >/dev/null 2>&1; then
		ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off >/dev/null 2>&1 ||
			log "note: ethtool -K $dev failed in $ns; offloads left as they are"
	else
		if [ "$NOTED_ETHTOOL" -eq 0 ]; then
			log "note: ethtool not found; limiting gso_max_size with ip(8) instead"
			NOTED_ETHTOOL=1
		fi
		ip -n "$ns" link set dev "$dev" gso_max_size 1500 >/dev/null 2>&1 ||
			log "note: could not set gso_max_size on $dev in $ns"
		ip -n "$ns" link set dev "$dev" gro_max_size 1500 >/dev/null 2>&1 || true
	fi
}

# mark_ce FAMILY NS IFACE... : the switch in NS marks CE above $ECN_PPS
# (with a burst of $ECN_BURST packets) on IFACEs, in nftables' FAMILY:
# bridge (a bridged leaf or spine) or ip (a routed one, fabric_routed.sh).
mark_ce() {
	local family=$1 ns=$2 dev rules=""
	shift 2
	for dev in "$@"; do
		rules="$rules
		oifname \"$dev\" ip ecn ect0 limit rate over $ECN_PPS/second burst $ECN_BURST packets counter ip ecn set ce"
	done
	ip netns exec "$ns" nft -f - <<-EOF || die "nftables CE marking in $ns failed"
		table $family weft_ecn {
			chain forward {
				type filter hook forward priority 0; policy accept;$rules
			}
		}
	EOF
}

# A host that negotiates ECN and sends wire-size packets.
ecn_host() {
	local ns=$1
	ip netns exec "$ns" sysctl -qw net.ipv4.tcp_ecn=1 || die "tcp_ecn in $ns"
	no_offload "$ns" "$HOST_IF"
}

shape() {
	local ns=$1 dev=$2 rate=$3 bps burst limit
	bps=$(rate_bytes "$rate") || die "bad rate '$rate' (use tc units, e.g. 300mbit)"
	# 4 ms worth of tokens (at least 32 KiB) and ~25 ms of queue, unless
	# --tbf-burst / --tbf-limit (TBF_BURST, TBF_LIMIT) say otherwise.
	burst=$((bps / 250))
	[ "$burst" -ge 32768 ] || burst=32768
	[ -z "$TBF_BURST" ] || burst=$TBF_BURST
	limit=$((bps / 40 + burst))
	[ -z "$TBF_LIMIT" ] || limit=$TBF_LIMIT
	tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" limit "$limit" ||
		die "tc tbf on $dev in $ns failed"
	record "tbf $ns $dev $rate $burst $limit"
}

new_ns() {
	local ns=$1
	ip netns add "$ns" || die "cannot create namespace $ns (exists already?)"
	record "ns $ns"
	ip -n "$ns" link set lo up || die "lo up in $ns"
	# No IPv6: keeps router solicitations and MLD off the shaped uplinks.
	# shellcheck disable=SC2016
	ip netns exec "$ns" sh -c 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; do [ -w "$f" ] && echo 1 > "$f"; done; true'
}

new_bridge() {
	local ns=$1
	ip -n "$ns" link add name br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0 ||
		die "bridge in $ns"
	ip -n "$ns" link set br0 up || die "br0 up in $ns"
}

# start_lldpd NS NAME IFACES SOCK
start_lldpd() {
	local ns=$1 name=$2 ifaces=$3 sock=$4 conf pid start i
	conf="$DIR/$name.conf"
	cat >"$conf" <<-EOF
		configure system hostname $name
		configure system description "weft test fabric $name"
		configure lldp tx-hold $TX_HOLD
		configure lldp tx-interval $TX_INTERVAL
		configure lldp portidsubtype ifname
	EOF
	case $name in
	leaf*) echo "configure system capabilities enabled bridge" >>"$conf" ;;
	esac
	# -d: stay in the foreground so that $! is lldpd's own PID (ip netns exec
	# execs). -p keeps it off /run/lldpd.pid; -O replaces /etc/lldpd.{conf,d}.
	ip netns exec "$ns" lldpd -d -k -u "$sock" -p "$DIR/$name.pid" -I "$ifaces" -O "$conf" \
		</dev/null >"$DIR/$name.log" 2>&1 &
	pid=$!
	start=""
	for ((i = 0; i < 20; i++)); do
		start=$(proc_start "$pid") && break
		sleep 0.05
	done
	record "pid $pid $ns ${start:-0}"
}

UP_DONE=1
up_abort() {
	local rc=$?
	trap - EXIT ERR INT TERM
	if [ "$UP_DONE" -eq 0 ]; then
		log "up failed; tearing down what was built"
		do_down
	fi
	exit "$rc"
}

cmd_up() {
	local leaves=2 hpl=2 rate="" timeout=15 spines=1
	ECN_PPS="" ECN_BURST="" TBF_BURST="" TBF_LIMIT=""
	while [ $# -gt 0 ]; do
		case $1 in
		--leaves) leaves=${2:?}; shift 2 ;;
		--hosts-per-leaf) hpl=${2:?}; shift 2 ;;
		--spine-rate) rate=${2:?}; shift 2 ;;
		--ecn-mark) ECN_PPS=${2:?}; shift 2 ;;
		--ecn-burst) ECN_BURST=${2:?}; shift 2 ;;
		--tbf-burst) TBF_BURST=$(tbf_size --tbf-burst "${2:?}" 67108864) || exit 1; shift 2 ;;
		--tbf-limit) TBF_LIMIT=$(tbf_size --tbf-limit "${2:?}" 268435456) || exit 1; shift 2 ;;
		--spines) spines=${2:?}; shift 2 ;;
		--prefix) PREFIX=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		--timeout) timeout=${2:?}; shift 2 ;;
		-h | --help) usage; exit 0 ;;
		*) die "up: unknown option '$1'" ;;
		esac
	done
	case $leaves$hpl in *[!0-9]*) die "--leaves/--hosts-per-leaf take numbers" ;; esac
	if [ "$leaves" -lt 1 ] || [ "$hpl" -lt 1 ]; then die "need at least 1 leaf and 1 host per leaf"; fi
	[ $((leaves * hpl)) -le 200 ] || die "at most 200 hosts"
	if [ "$leaves" -gt 64 ] || [ "$hpl" -gt 64 ]; then die "at most 64 leaves and 64 hosts per leaf"; fi
	case $spines in '' | *[!0-9]*) die "--spines takes a number" ;; esac
	if [ "$spines" -lt 1 ] || [ "$spines" -gt 8 ]; then die "--spines: 1 to 8"; fi
	local r1
	for r1 in ${rate//,/ }; do
		rate_bytes "$r1" >/dev/null || die "bad --spine-rate '$r1' (e.g. 300mbit)"
	done
	[ "$spines" -gt 1 ] || [ "$rate" = "${rate%,*}" ] || die "--spine-rate R1,R2,... needs --spines"

	case $ECN_PPS in *[!0-9]*) die "--ecn-mark takes packets per second" ;; esac
	case $ECN_BURST in *[!0-9]*) die "--ecn-burst takes a number of packets" ;; esac
	[ -z "$ECN_BURST" ] || [ -n "$ECN_PPS" ] || die "--ecn-burst needs --ecn-mark"
	[ -n "$rate" ] || [ -z "$TBF_BURST$TBF_LIMIT" ] || die "--tbf-burst/--tbf-limit need --spine-rate"
	if [ -n "$ECN_PPS" ] && [ -z "$ECN_BURST" ] && [ -n "$TBF_BURST" ]; then
		# The bucket's depth in time at the (first) spine's rate, in packets at PPS.
		ECN_BURST=$(awk -v b="$TBF_BURST" -v p="$ECN_PPS" -v r="$(rate_bytes "${rate%%,*}")" \
			'BEGIN {n = int(b * p / r + 0.5); print n < 1 ? 1 : n}')
	elif [ -n "$ECN_PPS" ] && [ -z "$ECN_BURST" ]; then
		ECN_BURST=$((ECN_PPS / 250))
		[ "$ECN_BURST" -ge 22 ] || ECN_BURST=22
	fi
	[ -z "$ECN_BURST" ] || [ "$ECN_BURST" -ge 1 ] || die "--ecn-burst: at least 1 packet"
	check_prereqs
	if [ -n "$ECN_PPS" ]; then
		command -v nft >/dev/null 2>&1 || skip "'nft' not found (install nftables) for --ecn-mark"
		command -v ethtool >/dev/null 2>&1 || skip "'ethtool' not found for --ecn-mark"
	fi
	[ -n "$PREFIX" ] || PREFIX="wf$$"
	[[ $PREFIX =~ ^[A-Za-z][A-Za-z0-9_]{0,15}$ ]] ||
		die "prefix must be a letter then up to 15 letters, digits or _"
	[ -n "$STATE" ] || STATE=$(state_default "$PREFIX")
	[ ! -e "$STATE" ] || die "state file $STATE exists: fabric $PREFIX is up (fabric.sh down --state $STATE)"
	local n
	for n in $(ip netns list | awk '{print $1}'); do
		case $n in "$PREFIX"-*) die "namespace $n exists already; choose another --prefix" ;; esac
	done

	local t0=$SECONDS subnet x
	x=$(printf '%s' "$PREFIX" | cksum | awk '{print 1 + $1 % 254}')
	subnet="10.77.$x"
	DIR="/tmp/weft-fabric-$PREFIX.d"
	: >"$STATE" || die "cannot write $STATE"
	# From here on, a failure (die, a failed command, a signal) undoes
	# whatever was recorded.
	UP_DONE=0
	trap up_abort EXIT
	trap 'exit 1' ERR
	trap 'exit 130' INT
	trap 'exit 143' TERM
	set -E
	record "# weft test fabric (tests/fabric/fabric.sh), $(date '+%F %T')"
	record "prefix $PREFIX"
	record "subnet $subnet"
	# lldpcli drops root for _lldpd (uid only: the gid stays root), and lldpd
	# runs it to apply the config: the directory must be searchable by others.
	mkdir "$DIR" && chmod 755 "$DIR"
	record "dir $DIR"
	# lldpd's privilege-separation chroot; lldpd creates it too, but several
	# instances starting at once could race on it.
	[ -d /run/lldpd ] || mkdir -m 755 /run/lldpd 2>/dev/null || [ -d /run/lldpd ]

	local spine="$PREFIX-spine" l h i lns hns ip sock ports
	if [ "$spines" -gt 1 ]; then
		# shellcheck source=tests/fabric/fabric_routed.sh
		. "$(dirname "$FABRIC_SH")/fabric_routed.sh"
		build_routed "$leaves" "$hpl" "$spines" "$x" "$rate"
	else
		new_ns "$spine"
		new_bridge "$spine"
		i=0
		for ((l = 1; l <= leaves; l++)); do
			lns="$PREFIX-leaf$l"
			new_ns "$lns"
			new_bridge "$lns"
			ip -n "$lns" link add name "$UPLINK_IF" type veth peer name "swp$l" netns "$spine" ||
				die "uplink veth leaf$l"
			ip -n "$lns" link set "$UPLINK_IF" master br0 up
			ip -n "$spine" link set "swp$l" master br0 up
			if [ -n "$rate" ]; then
				no_offload "$lns" "$UPLINK_IF"
				no_offload "$spine" "swp$l"
				shape "$lns" "$UPLINK_IF" "$rate"
				shape "$spine" "swp$l" "$rate"
			fi
			record "uplink leaf$l $lns $UPLINK_IF $spine swp$l ${rate:-none}"
			[ -z "$ECN_PPS" ] || mark_ce bridge "$lns" "$UPLINK_IF"
			ports=""
			for ((h = 1; h <= hpl; h++)); do
				i=$((i + 1))
				hns="$PREFIX-h$i"
				ip="$subnet.$((10 + i))"
				new_ns "$hns"
				ip -n "$hns" link add name "$HOST_IF" type veth peer name "swp$h" netns "$lns" ||
					die "host veth $hns"
				ip -n "$lns" link set "swp$h" master br0 up
				ip -n "$hns" addr add "$ip/24" dev "$HOST_IF"
				ip -n "$hns" link set "$HOST_IF" up
				[ -z "$ECN_PPS" ] || { ecn_host "$hns"; no_offload "$lns" "swp$h"; }
				ports="${ports:+$ports,}swp$h"
				sock="$DIR/$hns.sock"
				start_lldpd "$hns" "$hns" "$HOST_IF" "$sock"
				record "host $hns $hns $ip leaf$l $sock $HOST_IF"
			done
			sock="$DIR/leaf$l.sock"
			start_lldpd "$lns" "leaf$l" "$ports" "$sock"
			record "leaf leaf$l $lns $sock"
		done

		if [ -n "$ECN_PPS" ]; then
			local -a sports=()
			for ((l = 1; l <= leaves; l++)); do sports+=("swp$l"); done
			mark_ce bridge "$spine" "${sports[@]}"
			record "ecn $ECN_PPS $ECN_BURST"
		fi
	fi

	# Wait (bounded) until every host's lldpd sees its leaf and every leaf sees
	# all of its hosts.
	local deadline=$((SECONDS + timeout)) missing name leaf kv
	while :; do
		missing=""
		while read -r _ name _ _ leaf sock _; do
			kv=$(lldpcli -u "$sock" show neighbors -f keyvalue 2>/dev/null) || kv=""
			grep -qx "lldp\.$HOST_IF\.chassis\.name=$leaf" <<<"$kv" || missing="$missing $name->$leaf"
		done < <(grep '^host ' "$STATE")
		while read -r _ leaf _ sock; do
			kv=$(lldpcli -u "$sock" show neighbors -f keyvalue 2>/dev/null) || kv=""
			while read -r _ name _ _ l _; do
				[ "$l" = "$leaf" ] || continue
				grep -q "\.chassis\.name=$name\$" <<<"$kv" || missing="$missing $leaf->$name"
			done < <(grep '^host ' "$STATE")
		done < <(grep '^leaf ' "$STATE")
		[ -n "$missing" ] || break
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "lldp neighbours still missing after ${timeout}s:$missing"
			local f
			for f in "$DIR"/*.log; do
				log "--- $f"
				tail -n 5 "$f" >&2
			done
			false # -> ERR trap: tear down, exit 1
		fi
		sleep 0.25
	done

	# Every host reaches every other (ARP through the bridges and the spine).
	if command -v ping >/dev/null 2>&1; then
		local first
		first=$(awk '$1 == "host" {print $3; exit}' "$STATE")
		while read -r _ name _ ip _; do
			[ "$name" = "$first" ] && continue
			ip netns exec "$first" ping -q -c 1 -W 2 "$ip" >/dev/null 2>&1 ||
				{ log "$first cannot reach $name ($ip)"; false; }
		done < <(grep '^host ' "$STATE")
	fi

	record "ready"
	UP_DONE=1
	trap - ERR INT TERM EXIT
	set +E
	if [ "$spines" -gt 1 ]; then subnet="10.101-$((100 + leaves)).$x"; fi
	local tbf=""
	[ -z "$rate" ] || tbf=$(awk '$1 == "tbf" && !seen[$4]++ {
		printf "%s%s burst %d limit %d", n++ ? "; " : " (tbf ", $4, $5, $6} END {if (n) print ")"}' "$STATE")
	echo "fabric $PREFIX up in $((SECONDS - t0))s: $leaves leaves x $hpl hosts, $spines spine(s), $subnet.0/24, spine uplinks ${rate:-unshaped}$tbf"
	show_layout
	echo "state: $STATE   (down: $FABRIC_SH down --state $STATE)"
}

show_layout() {
	printf '%-14s %-16s %-14s %-6s %-6s %s\n' HOST NAMESPACE IP LEAF IF LLDP-SOCKET
	awk '$1 == "host" {printf "%-14s %-16s %-14s %-6s %-6s %s\n", $2, $3, $4, $5, $7, $6}' "$STATE"
}

# ---------------------------------------------------------------------------
# down

# Processes left inside one of our namespaces (a rank of a failed test, an
# lldpd helper) were started through this fabric: end them by PID.
kill_ns_pids() {
	local ns=$1 pids i
	pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
	[ -n "${pids// /}" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null
	for ((i = 0; i < 40; i++)); do
		pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
		[ -n "${pids// /}" ] || return 0
		sleep 0.05
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null
	sleep 0.1
}

do_down() {
	set +e
	trap - ERR
	[ -f "$STATE" ] || return 0
	local kind a c nslist="" dir="" ns err i
	while read -r kind a _ c _; do
		case $kind in
		pid) kill_ours "$a" "$c" ;;
		ns) nslist="$a $nslist" ;; # reverse order
		dir) dir=$a ;;
		esac
	done <"$STATE"
	for ns in $nslist; do
		[ -e "/run/netns/$ns" ] || continue
		kill_ns_pids "$ns"
		# EBUSY while a process that entered via ip netns exec (own mount
		# namespace, holding a copy of /run/netns) is still exiting: retry.
		for ((i = 0; i < 20; i++)); do
			err=$(ip netns del "$ns" 2>&1) && break
			[ -e "/run/netns/$ns" ] || break
			sleep 0.1
		done
		[ ! -e "/run/netns/$ns" ] || log "warning: could not delete namespace $ns: $err"
	done
	if [ -n "$dir" ] && [ -d "$dir" ]; then
		case $dir in
		/tmp/weft-fabric-*.d) rm -rf -- "$dir" ;;
		*) log "warning: not removing unexpected dir $dir" ;;
		esac
	fi
	rm -f -- "$STATE"
	return 0
}

cmd_down() {
	while [ $# -gt 0 ]; do
		case $1 in
		--prefix) PREFIX=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		-h | --help) usage; exit 0 ;;
		*) die "down: unknown option '$1'" ;;
		esac
	done
	resolve_state
	if [ ! -f "$STATE" ]; then
		echo "fabric: nothing to tear down ($STATE not found)"
		return 0
	fi
	local t0=$SECONDS
	do_down
	echo "fabric down in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# run, show

cmd_run() {
	while [ $# -gt 0 ]; do
		case $1 in
		--prefix) PREFIX=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		-*) die "run: unknown option '$1'" ;;
		*) break ;;
		esac
	done
	[ $# -ge 1 ] || die "run: HOST missing"
	local want=$1
	shift
	[ "${1:-}" = "--" ] && shift
	[ $# -ge 1 ] || die "run: command missing (fabric.sh run HOST -- CMD ...)"
	resolve_state
	[ -f "$STATE" ] || die "no fabric state $STATE"
	local pfx line
	pfx=$(awk '$1 == "prefix" {print $2}' "$STATE")
	case $want in
	[0-9]*) want="$pfx-h$want" ;;
	h[0-9]*) want="$pfx-$want" ;;
	esac
	line=$(awk -v h="$want" '$1 == "host" && ($2 == h || $3 == h)' "$STATE")
	[ -n "$line" ] || die "run: no host '$want' in $STATE"
	local name ns ip leaf sock ifname
	read -r _ name ns ip leaf sock ifname <<<"$line"
	export FABRIC_HOST=$name FABRIC_IP=$ip FABRIC_IFNAME=$ifname FABRIC_LEAF=$leaf \
		FABRIC_LLDP_SOCKET=$sock FABRIC_STATE=$STATE
	export WEFT_SOCKET_IFNAME=${WEFT_SOCKET_IFNAME:-$ifname}
	export WEFT_LLDP_SOCKET=${WEFT_LLDP_SOCKET:-$sock}
	if command -v unshare >/dev/null 2>&1 && command -v hostname >/dev/null 2>&1; then
		# Own UTS namespace: gethostname() returns the host's name in there.
		# shellcheck disable=SC2016
		exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
	fi
	exec ip netns exec "$ns" "$@"
}

cmd_show() {
	while [ $# -gt 0 ]; do
		case $1 in
		--prefix) PREFIX=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		*) die "show: unknown option '$1'" ;;
		esac
	done
	resolve_state
	[ -f "$STATE" ] || die "no fabric state $STATE"
	show_layout
}

# CE marks per switch port since the fabric came up: "SWITCH PORT PACKETS"
# (the rules' anonymous counters; callers take differences).
cmd_marks() {
	while [ $# -gt 0 ]; do
		case $1 in
		--prefix) PREFIX=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		*) die "marks: unknown option '$1'" ;;
		esac
	done
	resolve_state
	[ -f "$STATE" ] || die "no fabric state $STATE"
	grep -q '^ecn ' "$STATE" || die "fabric was built without --ecn-mark"
	local ns
	for ns in $(awk '$1 == "ns" && $2 !~ /-h[0-9]+$/ {print $2}' "$STATE"); do
		{ ip netns exec "$ns" nft list table bridge weft_ecn 2>/dev/null ||
			ip netns exec "$ns" nft list table ip weft_ecn 2>/dev/null; } |
			awk -v sw="${ns##*-}" '/oifname/ {for (i = 1; i < NF; i++) {
				if ($i == "oifname") port = $(i + 1); if ($i == "packets" && $(i - 1) == "counter") n = $(i + 1) }
				gsub(/"/, "", port); print sw, port, n }'
	done
}

# Bytes each leaf has sent up each of its uplinks since the fabric came up:
# "LEAF UPLINK SPINE BYTES" (the leaf end's tx counter: what that leaf's
# hosts sent toward that spine; each direction of a flow is hashed on its
# own, at its own leaf).
cmd_spines() {
	while [ $# -gt 0 ]; do
		case $1 in
		--prefix) PREFIX=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		*) die "spines: unknown option '$1'" ;;
		esac
	done
	resolve_state
	[ -f "$STATE" ] || die "no fabric state $STATE"
	grep -q '^spine ' "$STATE" || die "fabric was built without --spines"
	local leaf lns dev sns n
	while read -r _ leaf lns dev sns _; do
		n=$(ip netns exec "$lns" cat "/sys/class/net/$dev/statistics/tx_bytes") || n=0
		echo "$leaf $dev ${sns##*-} $n"
	done < <(grep '^uplink ' "$STATE")
}

# ---------------------------------------------------------------------------
# with

WITH_UP=0
with_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$WITH_UP" -eq 1 ]; then
		do_down
		log "fabric $PREFIX torn down"
	fi
	exit "$rc"
}

cmd_with() {
	local -a upopts=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		case $1 in
		--prefix) PREFIX=${2:?}; upopts+=("$1" "$2"); shift 2 ;;
		--state) STATE=${2:?}; upopts+=("$1" "$2"); shift 2 ;;
		*) upopts+=("$1"); shift ;;
		esac
	done
	[ "${1:-}" = "--" ] || die "with: use fabric.sh with [up options] -- CMD ..."
	shift
	[ $# -ge 1 ] || die "with: command missing"
	[ -n "$PREFIX" ] || PREFIX="wf$$"
	[ -n "$STATE" ] || STATE=$(state_default "$PREFIX")
	upopts+=(--prefix "$PREFIX" --state "$STATE")
	[ ! -e "$STATE" ] || die "state file $STATE exists: fabric $PREFIX is up already"
	local rc=0
	WITH_UP=1
	trap with_cleanup EXIT
	ns_trap_signals
	# `up` as its own process: it tears down its own partial work on failure.
	"$FABRIC_SH" up "${upopts[@]}" || rc=$?
	[ "$rc" -eq 0 ] || exit "$rc"
	export FABRIC_STATE=$STATE FABRIC_PREFIX=$PREFIX FABRIC_SH
	ns_run "$@" || rc=$?
	exit "$rc"
}

# ---------------------------------------------------------------------------

[ $# -ge 1 ] || { usage; exit 1; }
sub=$1
shift
case $sub in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
run) cmd_run "$@" ;;
show) cmd_show "$@" ;;
marks) cmd_marks "$@" ;;
spines) cmd_spines "$@" ;;
with) cmd_with "$@" ;;
rate-bytes) [ $# -eq 1 ] || die "rate-bytes takes one rate"
	rate_bytes "$1" || die "bad rate '$1' (use tc units, e.g. 300mbit)" ;;
size-bytes) [ $# -eq 1 ] || die "size-bytes takes one size"
	size_bytes "$1" || die "bad size '$1' (bytes, or with k, kb, m or mb: e.g. 64k, 0.5m)" ;;
-h | --help | help) usage ;;
*) die "unknown subcommand '$sub' (up, down, run, show, marks, spines, with, rate-bytes, size-bytes)" ;;
esac
