# shellcheck shell=bash
# fabric_routed.sh — the two-spine (or more) variant of fabric.sh, sourced
# by `fabric.sh up --spines S` with S >= 2. Not run on its own.
#
# Layer 3 from the leaves up, as a fat tree's ECMP is: every leaf is a
# router with its hosts on a bridge (leaf L's hosts in 10.(100+L).X.0/24,
# gateway .1 on the leaf's br0) and one routed uplink to each spine
# (upS in the leaf, swpL in spine S, 172.(15+S).L.0/30: .1 the leaf, .2 the
# spine). A leaf reaches every other leaf's hosts by a multipath route
# with one next hop per spine, hashed on L4 (fib_multipath_hash_policy=3:
# addresses, protocol and ports; routed_ns says why), so two TCP
# connections between the same two hosts take different spines when their
# source ports hash apart. Each
# spine routes each leaf's /24 down its link. Uplinks are shaped per spine
# (--spine-rate R, or R1,R2,... one per spine) in both directions; with
# --ecn-mark the leaves mark on their uplinks and the spines on their
# downlinks, in nftables' ip family (the traffic is routed, not bridged).
# Records as fabric.sh, plus: spine NAME NS, and one uplink line per
# (leaf, spine): uplink leafL LEAFNS upS SPINENS swpL RATE.

# ECMP as a switch does it: a hash of the 5-tuple in the packet's headers
# (policy 3, fields 0x37: addresses, protocol, ports; Linux 5.12+). Policy
# 1 takes the hash the sending socket put on the packet when there is one
# (skb->l4_hash, which survives the veth), and the kernel draws a socket a
# new one at each retransmission timeout (net.core.txrehash): TCP then
# re-paths itself after an RTO, which no switch hashing headers does (a
# connection with every segment lost on one spine came back on the other
# after 1.5 s, with Weft's failover off). Older kernels keep policy 1.
routed_ns() {
	local ns=$1
	new_ns "$ns"
	ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.default.rp_filter=0 || die "routing sysctls in $ns"
	ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_fields=0x37 \
		net.ipv4.fib_multipath_hash_policy=3 2>/dev/null ||
		ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 ||
		die "multipath hash policy in $ns"
}

# build_routed LEAVES HOSTS_PER_LEAF SPINES X RATES (RATES: "" or R or R1,R2,...)
build_routed() {
	local leaves=$1 hpl=$2 spines=$3 x=$4 rates=$5 l s h m i lns sns hns ip sock ports rate
	local -a rate_of=()
	IFS=, read -r -a rate_of <<<"$rates"
	for ((s = 1; s <= spines; s++)); do
		rate=${rate_of[s - 1]:-${rate_of[0]:-}}
		[ -z "$rate" ] || rate_bytes "$rate" >/dev/null || die "bad --spine-rate '$rate'"
		routed_ns "$PREFIX-spine$s"
		record "spine spine$s $PREFIX-spine$s ${rate:-none}"
	done
	i=0
	for ((l = 1; l <= leaves; l++)); do
		lns="$PREFIX-leaf$l"
		routed_ns "$lns"
		new_bridge "$lns"
		ip -n "$lns" addr add "10.$((100 + l)).$x.1/24" dev br0
		local -a marked=()
		for ((s = 1; s <= spines; s++)); do
			sns="$PREFIX-spine$s"
			rate=${rate_of[s - 1]:-${rate_of[0]:-}}
			ip -n "$lns" link add name "up$s" type veth peer name "swp$l" netns "$sns" ||
				die "uplink veth leaf$l-spine$s"
			ip -n "$lns" addr add "172.$((15 + s)).$l.1/30" dev "up$s"
			ip -n "$sns" addr add "172.$((15 + s)).$l.2/30" dev "swp$l"
			ip -n "$lns" link set "up$s" up
			ip -n "$sns" link set "swp$l" up
			if [ -n "$rate" ] || [ -n "$ECN_PPS" ]; then
				no_offload "$lns" "up$s"
				no_offload "$sns" "swp$l"
			fi
			if [ -n "$rate" ]; then
				shape "$lns" "up$s" "$rate"
				shape "$sns" "swp$l" "$rate"
			fi
			ip -n "$sns" route add "10.$((100 + l)).$x.0/24" via "172.$((15 + s)).$l.1" dev "swp$l"
			record "uplink leaf$l $lns up$s $sns swp$l ${rate:-none}"
			marked+=("up$s")
		done
		[ -z "$ECN_PPS" ] || mark_ce ip "$lns" "${marked[@]}"
		ports=""
		for ((h = 1; h <= hpl; h++)); do
			i=$((i + 1))
			hns="$PREFIX-h$i"
			ip="10.$((100 + l)).$x.$((10 + i))"
			new_ns "$hns"
			ip -n "$hns" link add name "$HOST_IF" type veth peer name "swp$h" netns "$lns" ||
				die "host veth $hns"
			ip -n "$lns" link set "swp$h" master br0 up
			ip -n "$hns" addr add "$ip/24" dev "$HOST_IF"
			ip -n "$hns" link set "$HOST_IF" up
			ip -n "$hns" route add default via "10.$((100 + l)).$x.1"
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
	# Every leaf reaches every other leaf through every spine.
	for ((l = 1; l <= leaves; l++)); do
		for ((m = 1; m <= leaves; m++)); do
			[ "$m" -ne "$l" ] || continue
			local -a hops=()
			for ((s = 1; s <= spines; s++)); do
				hops+=(nexthop via "172.$((15 + s)).$l.2" dev "up$s" weight 1)
			done
			ip -n "$PREFIX-leaf$l" route add "10.$((100 + m)).$x.0/24" "${hops[@]}" ||
				die "multipath route leaf$l -> leaf$m"
		done
	done
	if [ -n "$ECN_PPS" ]; then
		for ((s = 1; s <= spines; s++)); do
			local -a down=()
			for ((l = 1; l <= leaves; l++)); do down+=("swp$l"); done
			mark_ce ip "$PREFIX-spine$s" "${down[@]}"
		done
		record "ecn $ECN_PPS $ECN_BURST"
	fi
}
