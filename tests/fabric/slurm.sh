#!/bin/bash
# slurm.sh — a real Slurm cluster on a fabric.sh fabric: one slurmctld and
# one slurmd per host namespace, from Debian's slurm-wlm, with its own munged,
# its own SLURM_CONF (never the machine's /etc/slurm) and topology/tree from a
# topology.conf generated from the fabric (one SwitchName per leaf with its
# hosts, one "spine" switch above them).
#
# What it takes on this machine kind (each one checked):
#   - munged runs as the munge user with its own key and socket
#     (AuthInfo=socket=...), so no machine-wide munged is needed or touched;
#   - SlurmctldHost=<this machine's short hostname>(<IP of the first host>):
#     slurmctld checks that its hostname is the one named, and it runs in the
#     first host's network namespace, so it binds only addresses there;
#   - each slurmd starts as `nsenter --net=/run/netns/NS slurmd -N hN` inside
#     `unshare -m -u` (plain `ip netns exec` remounts /sys, and slurmd then
#     finds no usable cgroup tree), with a private tmpfs on /tmp (PMIx keeps
#     per-step directories in /tmp, and nodes must not share them), a private
#     /etc/hosts naming every node (as on a real cluster, where node names
#     resolve) and the node's name as its hostname, started in DIR (a
#     working directory under the hidden /tmp makes every slurmstepd
#     complain that it cannot return to it);
#   - the fabric's lldpd sockets (in its /tmp directory) appear to each node's
#     tasks under DIR/fabric, so that jobs can also ask LLDP;
#   - spool, pid and log files per node with %n; ProctrackType=
#     proctrack/linuxproc and TaskPlugin=task/none (no cgroups needed).
# Nodes are h1..hN in the fabric's host order, at the fabric's addresses; the
# cluster's files live in /run/weft-slurm-PREFIX.d (not /tmp, which slurmd
# and its tasks do not share with this machine). Tasks see this machine's
# files except /tmp: run programs from elsewhere (the test copies them into
# the cluster's bin/).
#
# Usage:
#   slurm.sh up   [--fabric FABRIC_STATE] [--state FILE] [--timeout SECS]
#   slurm.sh down [--state FILE]                       (idempotent)
#   slurm.sh run  [--state FILE] -- CMD [ARGS...]
#                 CMD (srun, sbatch, sinfo, ...) in the first host's network
#                 namespace, where the controller is, with SLURM_CONF set
#   slurm.sh with [--timeout SECS] -- CMD [ARGS...]
#                 inside `fabric.sh with` (FABRIC_STATE set): up, CMD with
#                 SLURM_STATE and SLURM_CONF exported, always down; returns
#                 CMD's status, 77 if the cluster cannot start here
# Without --fabric, up uses $FABRIC_STATE; without --state, the state file is
# /tmp/weft-slurm-PREFIX.state (PREFIX: the fabric's), or $SLURM_STATE.
#
# State file, one record a line, appended as things start so that `down` can
# undo a partial `up`:
#   dir DIR | conf FILE | ctl NAMESPACE IP
#   pid PID STARTTIME WHAT      (munged, slurmctld, every slurmd)
#   node NAME NAMESPACE IP LEAF LLDP_SOCKET   (the socket as the node's tasks see it)
#   ready
# `down` ends the recorded PIDs (checking their start time), then the
# slurmstepd processes those slurmds left in the fabric's namespaces, then
# removes DIR and the state file.
#
# Exit status: 0 ok, 1 error, 77 cannot run here (not root, packages
# missing, the daemons do not come up).
# shellcheck disable=SC2317  # trap handlers are reached indirectly
# shellcheck disable=SC2013  # the state's fields are single words

set -u
set -o pipefail

SLURM_SH=$(readlink -f "$0")
SELF=$SLURM_SH
STATE=""
FABRIC=""

# shellcheck source=tests/fabric/ns_common.sh
. "$(dirname "$SLURM_SH")/ns_common.sh"

check_prereqs() {
	[ "$(id -u)" -eq 0 ] || skip "the Slurm cluster needs root"
	local t
	for t in slurmctld slurmd srun sinfo scontrol munged munge nsenter unshare setpriv; do
		command -v "$t" >/dev/null 2>&1 ||
			skip "'$t' not found (install slurm-wlm, munge and util-linux)"
	done
	getent passwd munge >/dev/null 2>&1 || skip "the munge user is missing (install munge)"
	if [ ! -f "$FABRIC" ] || ! grep -qx ready "$FABRIC"; then
		die "no ready fabric (${FABRIC:-FABRIC_STATE unset}): run inside fabric.sh with"
	fi
}

resolve_state() {
	[ -n "$STATE" ] || STATE=${SLURM_STATE:-}
	if [ -z "$STATE" ]; then
		[ -n "$FABRIC" ] || FABRIC=${FABRIC_STATE:-}
		[ -n "$FABRIC" ] || die "no cluster given: use --state FILE, SLURM_STATE or FABRIC_STATE"
		STATE="/tmp/weft-slurm-$(awk '$1 == "prefix" {print $2}' "$FABRIC").state"
	fi
}

field() { awk -v k="$1" '$1 == k {print $'"$2"'; exit}' "$STATE"; }

# ---------------------------------------------------------------------------
# up

start_munged() {
	local m=$DIR/munge
	# munged insists: its socket's directory searchable by all and writable by
	# none but itself, its key readable by it alone.
	mkdir -m 755 "$m" || die "cannot create $m"
	mkdir -m 700 "$m/private" || die "cannot create $m/private"
	dd if=/dev/urandom of="$m/private/munge.key" bs=1024 count=1 status=none ||
		die "cannot write a munge key"
	chmod 400 "$m/private/munge.key"
	chown -R munge: "$m" || die "cannot give $m to the munge user"
	setpriv --reuid munge --regid munge --clear-groups munged -F --socket="$m/munge.socket" \
		--key-file="$m/private/munge.key" --log-file="$m/private/munged.log" \
		--pid-file="$m/munged.pid" --seed-file="$m/private/munged.seed" \
		</dev/null >"$DIR/munged.out" 2>&1 &
	local pid=$! i
	record "pid $pid $(proc_start $pid || echo 0) munged"
	for ((i = 0; i < 100; i++)); do
		munge -S "$m/munge.socket" -n </dev/null 2>/dev/null | unmunge -S "$m/munge.socket" \
			>/dev/null 2>&1 && return 0
		proc_start "$pid" >/dev/null || break
		sleep 0.1
	done
	UP_WHY="munged did not start: $(tail -n 3 "$DIR/munged.out" | tr '\n' ' ')"
	return 1
}

write_conf() {
	local ctl_ip=$1 cpus name ns ip leaf
	cpus=$(nproc 2>/dev/null || echo 1)
	cat >"$CONF" <<-EOF
		# Generated by tests/fabric/slurm.sh for fabric $PREFIX: do not edit.
		ClusterName=weft$PREFIX
		SlurmctldHost=$(hostname -s)($ctl_ip)
		SlurmUser=root
		SlurmdUser=root
		AuthType=auth/munge
		CredType=cred/munge
		AuthInfo=socket=$DIR/munge/munge.socket
		SlurmctldPort=6817
		SlurmdPort=6818
		StateSaveLocation=$DIR/ctld
		SlurmdSpoolDir=$DIR/spool/%n
		SlurmctldPidFile=$DIR/slurmctld.pid
		SlurmdPidFile=$DIR/slurmd.%n.pid
		SlurmctldLogFile=$DIR/slurmctld.log
		SlurmdLogFile=$DIR/slurmd.%n.log
		SlurmctldDebug=info
		SlurmdDebug=info
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/none
		TopologyPlugin=topology/tree
		SwitchType=switch/none
		MpiDefault=none
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core
		SchedulerType=sched/builtin
		ReturnToService=2
		PropagateResourceLimits=NONE
		MessageTimeout=30
		KillWait=5
		MinJobAge=5
		AccountingStorageType=accounting_storage/none
		JobAcctGatherType=jobacct_gather/none
		JobCompType=jobcomp/none
		MailProg=/bin/true
	EOF
	printf '127.0.0.1 localhost\n' >"$DIR/hosts"
	while read -r name ns ip leaf; do
		echo "NodeName=$name NodeAddr=$ip CPUs=$cpus State=UNKNOWN" >>"$CONF"
		echo "$ip $name" >>"$DIR/hosts"
	done < <(awk '$1 == "node" {print $2, $3, $4, $5}' "$STATE")
	echo "PartitionName=weft Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
	# topology.conf sits beside slurm.conf, where topology/tree looks for it.
	{
		local l leaves=""
		for l in $(awk '$1 == "node" {print $5}' "$STATE" | uniq); do
			echo "SwitchName=$l Nodes=$(awk -v l="$l" '$1 == "node" && $5 == l {printf "%s%s", s, $2; s = ","}' "$STATE")"
			leaves="${leaves:+$leaves,}$l"
		done
		echo "SwitchName=spine Switches=$leaves"
	} >"$DIR/topology.conf"
}

start_slurmd() {
	local name=$1 ns=$2 pid
	mkdir -p "$DIR/spool/$name"
	# shellcheck disable=SC2016
	unshare -m -u --propagation private sh -c '
		mount --bind "$4" "$1/fabric" &&
		mount -t tmpfs -o size=256m,mode=1777 weft-slurm-tmp /tmp &&
		mount --bind "$1/hosts" /etc/hosts && hostname "$2" && cd "$1" &&
		exec nsenter --net="/run/netns/$3" slurmd -D -N "$2" -f "$1/slurm.conf"' \
		sh "$DIR" "$name" "$ns" "$(awk '$1 == "dir" {print $2}' "$FABRIC")" \
		</dev/null >"$DIR/slurmd.$name.out" 2>&1 &
	pid=$!
	record "pid $pid $(proc_start $pid || echo 0) slurmd-$name"
}

# Every node idle (bounded by the timeout); else UP_WHY says what is missing.
wait_idle() {
	local deadline=$((SECONDS + $1)) want states
	want=$(grep -c '^node ' "$STATE")
	while :; do
		states=$(run_in_ctl sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
		[ "$(grep -c ' idle$' <<<"$states")" -eq "$want" ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			UP_WHY="nodes not idle after $1 s: $(tr '\n' ' ' <<<"${states:-no answer from slurmctld}")"
			return 1
		fi
		sleep 0.5
	done
}

run_in_ctl() {
	SLURM_CONF=$(field conf 2) nsenter --net="/run/netns/$(field ctl 2)" "$@"
}

UP_DONE=1
UP_WHY=""
up_abort() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$UP_DONE" -eq 0 ]; then
		do_down
		[ "$rc" -eq 0 ] && rc=1
	fi
	exit "$rc"
}

# The daemons would not start: say why, with their logs, and skip.
up_skip() {
	local f
	log "$UP_WHY"
	for f in "$DIR"/*.out "$DIR"/*.log; do
		[ -s "$f" ] || continue
		log "--- $f"
		tail -n 5 "$f" >&2
	done
	do_down
	UP_DONE=1
	skip "the Slurm cluster did not start here: $UP_WHY"
}

cmd_up() {
	local timeout=90
	while [ $# -gt 0 ]; do
		case $1 in
		--fabric) FABRIC=${2:?}; shift 2 ;;
		--state) STATE=${2:?}; shift 2 ;;
		--timeout) timeout=${2:?}; shift 2 ;;
		-h | --help) usage; exit 0 ;;
		*) die "up: unknown option '$1'" ;;
		esac
	done
	[ -n "$FABRIC" ] || FABRIC=${FABRIC_STATE:-}
	check_prereqs
	PREFIX=$(awk '$1 == "prefix" {print $2}' "$FABRIC")
	resolve_state
	[ ! -e "$STATE" ] || die "state file $STATE exists: the cluster is up (slurm.sh down --state $STATE)"
	DIR=/run/weft-slurm-$PREFIX.d
	CONF=$DIR/slurm.conf
	[ ! -e "$DIR" ] || die "$DIR exists: another cluster of fabric $PREFIX?"
	local t0=$SECONDS
	: >"$STATE" || die "cannot write $STATE"
	UP_DONE=0
	trap up_abort EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	mkdir -m 755 "$DIR" || die "cannot create $DIR"
	mkdir "$DIR/ctld" "$DIR/spool" "$DIR/bin" "$DIR/fabric" || die "cannot fill $DIR"
	record "# weft Slurm cluster (tests/fabric/slurm.sh), $(date '+%F %T')"
	record "dir $DIR"
	record "conf $CONF"
	local i=0 name ns ip leaf sock
	while read -r _ _ ns ip leaf sock _; do
		i=$((i + 1))
		record "node h$i $ns $ip $leaf $DIR/fabric/${sock##*/}"
		[ "$i" -gt 1 ] || record "ctl $ns $ip"
	done < <(grep '^host ' "$FABRIC")
	[ "$i" -ge 1 ] || die "the fabric has no hosts"
	start_munged || up_skip
	write_conf "$(field ctl 3)"
	(cd "$DIR" && exec nsenter --net="/run/netns/$(field ctl 2)" slurmctld -D -i -f "$CONF" \
		</dev/null >"$DIR/slurmctld.out" 2>&1) &
	record "pid $! $(proc_start $! || echo 0) slurmctld"
	while read -r _ name ns _; do
		start_slurmd "$name" "$ns"
	done < <(grep '^node ' "$STATE")
	wait_idle "$timeout" || up_skip
	record "ready"
	UP_DONE=1
	trap - EXIT INT TERM
	echo "slurm cluster up in $((SECONDS - t0))s: $i nodes, controller $(field ctl 3) ($(field ctl 2)), SLURM_CONF=$CONF"
	run_in_ctl scontrol show topology 2>/dev/null | sed 's/^/  /'
	echo "state: $STATE   (down: $SLURM_SH down --state $STATE)"
}

# ---------------------------------------------------------------------------
# down

# slurmstepd daemonises away from its slurmd; those still in our nodes'
# namespaces were started by our slurmds.
kill_stepds() {
	local ns p
	for ns in $(awk '$1 == "node" {print $3}' "$STATE"); do # one word a line
		[ -e "/run/netns/$ns" ] || continue
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && kill -KILL "$p" 2>/dev/null
		done
	done
}

do_down() {
	set +e
	[ -f "$STATE" ] || return 0
	local dir pids
	dir=$(field dir 2)
	# Reverse order: the slurmds, then slurmctld, then munged.
	pids=$(awk '$1 == "pid" {print $2, $3}' "$STATE" | tac)
	while read -r pid start; do
		[ -n "$pid" ] && kill_ours "$pid" "$start" 100
	done <<<"$pids"
	kill_stepds
	case $dir in
	/run/weft-slurm-*.d) rm -rf -- "$dir" ;;
	"") ;;
	*) log "warning: not removing unexpected dir $dir" ;;
	esac
	rm -f -- "$STATE"
	return 0
}

cmd_down() {
	while [ $# -gt 0 ]; do
		case $1 in
		--state) STATE=${2:?}; shift 2 ;;
		-h | --help) usage; exit 0 ;;
		*) die "down: unknown option '$1'" ;;
		esac
	done
	resolve_state
	[ -f "$STATE" ] || { echo "slurm: nothing to tear down ($STATE not found)"; return 0; }
	do_down
	echo "slurm cluster down"
}

cmd_run() {
	while [ $# -gt 0 ]; do
		case $1 in
		--state) STATE=${2:?}; shift 2 ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	[ $# -ge 1 ] || die "run: command missing (slurm.sh run -- CMD ...)"
	resolve_state
	grep -qx ready "$STATE" 2>/dev/null || die "no ready cluster in $STATE"
	export SLURM_CONF
	SLURM_CONF=$(field conf 2)
	exec nsenter --net="/run/netns/$(field ctl 2)" "$@"
}

cmd_with() {
	local -a upopts=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		upopts+=("$1")
		shift
	done
	[ "${1:-}" = "--" ] || die "with: use slurm.sh with [--timeout SECS] -- CMD ..."
	shift
	[ $# -ge 1 ] || die "with: command missing"
	FABRIC=${FABRIC_STATE:-}
	resolve_state
	local rc=0
	"$SLURM_SH" up --fabric "$FABRIC" --state "$STATE" "${upopts[@]}" || return $?
	trap 'do_down' EXIT
	ns_trap_signals
	export SLURM_STATE=$STATE SLURM_SH
	SLURM_CONF=$(field conf 2)
	export SLURM_CONF
	ns_run "$@" || rc=$?
	return "$rc"
}

[ $# -ge 1 ] || { usage; exit 1; }
sub=$1
shift
case $sub in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
run) cmd_run "$@" ;;
with) cmd_with "$@" ;;
-h | --help | help) usage ;;
*) die "unknown subcommand '$sub' (up, down, run, with)" ;;
esac
