# shellcheck shell=bash
# ns_common.sh — what fabric.sh and slurm.sh share: their messages, the
# processes they record and end, and the runner behind their `with`.
# Sourced after the script sets SELF (its own path) and, before record
# is used, STATE (its state file).
#
#   log MSG, die MSG, skip MSG  on stderr; die exits 1, skip says SKIP and
#                               exits 77 (cannot run here)
#   usage                       the script's opening comment
#   record WORDS                one line appended to STATE
#   proc_start PID              the start time of a live process (field 22
#                               of /proc/PID/stat), to recognise it later;
#                               fails if it is gone or a zombie
#   kill_ours PID START [TRIES] end PID if it is still the process that
#                               started at START (0: any): TERM, then KILL
#                               after TRIES (40) x 50 ms
#   ns_trap_signals             INT and TERM from now on: passed to the
#                               command ns_run runs, else exit 130 / 143
#   ns_run CMD...               CMD asynchronously, keeping this shell's
#                               stdin, waited for; after a signal it has
#                               10 s to end, then KILL. CMD's status, or the
#                               signal's. The caller's EXIT trap tears down.

PROG=${SELF##*/}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
skip() {
	echo "SKIP: $*"
	exit 77
}

usage() {
	sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$SELF"
}

record() { echo "$*" >>"$STATE"; }

proc_start() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) } # drop "pid (comm) "
	# shellcheck disable=SC2086
	set -- $stat
	[ "$1" != Z ] && [ "$1" != X ] || return 1
	echo "${20}"
}

kill_ours() {
	local pid=$1 start=$2 tries=${3:-40} i cur
	cur=$(proc_start "$pid") || return 0
	[ "$start" = 0 ] || [ "$cur" = "$start" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < tries; i++)); do
		cur=$(proc_start "$pid") || return 0
		[ "$cur" = "$start" ] || [ "$start" = 0 ] || return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
}

NS_CHILD="" NS_SIG=""

# A signal: passed on to the command as TERM (an asynchronous command
# ignores SIGINT); before there is one, exit with it.
ns_signal() {
	NS_SIG=$1
	if [ -n "$NS_CHILD" ]; then
		kill -TERM "$NS_CHILD" 2>/dev/null
	else
		exit "$1"
	fi
}

ns_trap_signals() {
	trap 'ns_signal 130' INT
	trap 'ns_signal 143' TERM
}

ns_run() {
	local rc=0 i
	[ -z "$NS_SIG" ] || return "$NS_SIG"
	# The command runs asynchronously so that `wait` returns when a signal
	# arrives; it keeps this shell's stdin.
	exec 3<&0
	"$@" <&3 3<&- &
	NS_CHILD=$!
	exec 3<&-
	wait "$NS_CHILD" || rc=$?
	if [ -n "$NS_SIG" ]; then
		for ((i = 0; i < 100; i++)); do
			proc_start "$NS_CHILD" >/dev/null || break # exited (zombie) or reaped
			sleep 0.1
		done
		kill -KILL "$NS_CHILD" 2>/dev/null
		wait "$NS_CHILD" 2>/dev/null
		rc=$NS_SIG
	fi
	NS_CHILD=""
	return "$rc"
}
