#!/bin/bash
# bench_shrink.sh — what losing a rank costs: Weft's shrink against a
# torchrun restart from a checkpoint.
#
#   perf/bench_shrink.sh [--trials N] [--only local|fabric|torchrun|torchrun-fabric]
#                        [--monitor S] OUTDIR
#
#  local     build/shrink_bench -np 8 on this host (WEFT_KEEP_GOING=1): once
#            every rank is warm, rank (trial mod 8) is killed (SIGKILL) at a
#            random moment; the time from the kill to the first AllReduce
#            that every survivor completed, correct, on the shrunk
#            communicator (the latest of their t_ok, perf/shrink_bench.c);
#  fabric    the same, 4 ranks on 4 namespace hosts (tests/fabric/fabric.sh,
#            2 leaves x 2 hosts; root, Weft's socket transport), rank
#            (trial mod 4) killed;
#  torchrun  perf/torchrun_restart.py (gloo, 4 ranks on this host) under
#            torchrun --max_restarts 3 --monitor_interval S (default 5,
#            torch 1.13's own; --monitor 0.5 for its quickest): a worker
#            killed, torchrun stops the others and starts all 4 again, which
#            load the checkpoint; the time from the kill to the first step
#            every worker completed after the restart;
#  torchrun-fabric  the same on 4 namespace hosts, one torchrun agent per
#            host (--nnodes 4, rendezvous c10d on host 1).
#
# TRIALS per configuration (default 20). Every time is CLOCK_MONOTONIC,
# which every process of the machine shares (network namespaces included).
# OUTDIR gets each trial's output and one line per trial in CONFIG.txt
# ("trial victim recovery_s [detect_s shrink_s]"), and the summary
# (median and worst) on standard output. Needs root for the fabric parts
# (they are skipped with a reason otherwise). Take a quiet sitting: the
# figures are times on a 2-core machine (docs/benchmarks.md).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=${WEFT_BUILD:-$REPO/build}
PY=${PYTHON:-/usr/bin/python3}
TRIALS=20 ONLY=all MONITOR=5

usage() { sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; }
while [ $# -gt 0 ]; do
	case $1 in
	--trials) TRIALS=${2:?}; shift 2 ;;
	--only) ONLY=${2:?}; shift 2 ;;
	--monitor) MONITOR=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--inner) INNER=${2:?}; shift 2 ;;
	-*) usage >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { usage >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd) || exit 1
[ -x "$BUILD/shrink_bench" ] || { echo "bench_shrink: $BUILD/shrink_bench not built" >&2; exit 1; }

# kill_now PID: SIGKILL it; print the monotonic time just before.
kill_now() {
	"$PY" -c 'import os, sys, time; t = time.monotonic(); os.kill(int(sys.argv[1]), 9); print("%.6f" % t)' "$1"
}

# wait_pids DIR N: until N pid files are there (30 s at most).
wait_pids() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(find "$1" -maxdepth 1 -name 'pid.[0-9]*' | wc -l)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

pause() { sleep "$("$PY" -c 'import random; print(round(random.uniform(0.2, 0.6), 3))')"; }

# weft_times KILL_T FILES...: "recovery detect shrink" from the RESULT lines.
weft_times() {
	"$PY" - "$@" <<-'EOF'
		import re, sys
		kill, ok, fail, shrunk = float(sys.argv[1]), [], [], []
		for path in sys.argv[2:]:
		    for line in open(path):
		        m = re.search(r"t_fail=([\d.]+) t_shrunk=([\d.]+) t_ok=([\d.]+)", line)
		        if line.startswith("RESULT") and m:
		            f, s, o = (float(v) for v in m.groups())
		            fail.append(f); shrunk.append(s); ok.append(o)
		if not ok:
		    print("nan nan nan"); sys.exit(1)
		print("%.4f %.4f %.4f" % (max(ok) - kill, min(fail) - kill, max(shrunk) - max(fail)))
	EOF
}

# summary CONFIG: median and worst of the recoveries.
summary() {
	"$PY" - "$OUT/$1.txt" "$1" <<-'EOF'
		import statistics, sys
		rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
		rec = sorted(float(r[2]) for r in rows if r[2] != "nan")
		bad = sum(r[2] == "nan" for r in rows)
		if not rec:
		    print("%-16s no trial completed" % sys.argv[2]); sys.exit(0)
		extra = ""
		if len(rows[0]) >= 5:
		    det = [float(r[3]) for r in rows if r[2] != "nan"]
		    shr = [float(r[4]) for r in rows if r[2] != "nan"]
		    extra = "  (detect median %.3f s, shrink median %.3f s)" % (
		        statistics.median(det), statistics.median(shr))
		print("%-16s %2d trials: recovery median %.3f s, worst %.3f s%s%s" % (
		    sys.argv[2], len(rec), statistics.median(rec), rec[-1],
		    ", %d failed" % bad if bad else "", extra))
	EOF
}

run_local() {
	: >"$OUT/local.txt"
	local t d job victim tk
	for ((t = 1; t <= TRIALS; t++)); do
		d=$OUT/local/$t
		mkdir -p "$d"
		WEFT_KEEP_GOING=1 timeout -k 5 120 "$BUILD/shrink_bench" -np 8 --seconds 60 --after 20 \
			--dir "$d" >"$d/out" 2>"$d/err" &
		job=$!
		wait_pids "$d" 8 || { echo "local $t: not warm"; kill "$job"; wait "$job"; continue; }
		pause
		victim=$((t % 8))
		tk=$(kill_now "$(cat "$d/pid.$victim")")
		wait "$job" 2>/dev/null
		echo "$t $victim $(weft_times "$tk" "$d/out")" >>"$OUT/local.txt"
	done
	summary local
}

# ---- on the namespace fabric (runs inside fabric.sh with)
run_fabric_inner() {
	# shellcheck source-path=SCRIPTDIR source=../tests/fabric/lib.sh disable=SC1091
	. "$REPO/tests/fabric/lib.sh"
	fabric_ranks blocked
	: >"$OUT/fabric.txt"
	local t d r victim= tk port=29700
	for ((t = 1; t <= TRIALS; t++)); do
		d=$OUT/fabric/$t
		mkdir -p "$d"
		port=$((port + 1))
		local -a pids=()
		for ((r = 0; r < NRANKS; r++)); do
			timeout -k 5 120 "$FABRIC_SH" run "${RANK_HOST[r]}" -- \
				env WEFT_RANK="$r" WEFT_NRANKS="$NRANKS" WEFT_ROOT="${RANK_IP[0]}:$port" \
				WEFT_SECRET="$FABRIC_SECRET" WEFT_SOCKET_IFNAME="${RANK_IF[r]}" \
				WEFT_TRANSPORTS=socket "$BUILD/shrink_bench" --seconds 60 --after 20 \
				--dir "$d" >"$d/out.$r" 2>"$d/err.$r" &
			pids+=($!)
		done
		if wait_pids "$d" "$NRANKS"; then
			pause
			victim=$((t % NRANKS))
			tk=$(kill_now "$(cat "$d/pid.$victim")")
		fi
		for r in "${pids[@]}"; do wait "$r" 2>/dev/null; done
		echo "$t $victim $(weft_times "$tk" "$d"/out.*)" >>"$OUT/fabric.txt"
	done
	summary fabric
}

# ---- torchrun: the restart
# torch_times KILL_T FILES...: the latest of the workers' first step after the restart.
torch_times() {
	"$PY" - "$@" <<-'EOF'
		import re, sys
		kill, first = float(sys.argv[1]), {}
		for path in sys.argv[2:]:
		    for line in open(path, errors="replace"):
		        m = re.search(r"^(\[\w+\]:)?STEP \d+ t=([\d.]+) restart=([1-9])", line)
		        if m:
		            key = (path, m.group(1))
		            first[key] = min(first.get(key, 1e18), float(m.group(2)))
		print("%.4f" % (max(first.values()) - kill) if first else "nan")
	EOF
}

# restarted DIR N: until N workers stepped after a restart (60 s at most).
restarted() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ "$(cat "$1"/out* 2>/dev/null | grep -c 'STEP .* restart=1')" -ge "$((4 * $2))" ] && return 0
		sleep 0.1
	done
	return 1
}

run_torchrun() {
	local cfg=torchrun-m$MONITOR t d job victim tk
	: >"$OUT/$cfg.txt"
	for ((t = 1; t <= TRIALS; t++)); do
		d=$OUT/$cfg/$t
		mkdir -p "$d"
		OMP_NUM_THREADS=1 setsid timeout -k 5 180 "$PY" -m torch.distributed.run --standalone \
			--nproc_per_node 4 --max_restarts 3 --monitor_interval "$MONITOR" --redirects 1 \
			--tee 1 "$HERE/torchrun_restart.py" --dir "$d" --steps 100000 \
			>"$d/out" 2>"$d/err" &
		job=$!
		if wait_pids "$d" 4; then
			pause
			victim=$((t % 4))
			tk=$(kill_now "$(cat "$d/pid.$victim")")
			restarted "$d" 4 || echo "$cfg $t: no step after the restart"
		fi
		kill -TERM -- -"$job" 2>/dev/null
		wait "$job"
		echo "$t $victim $(torch_times "$tk" "$d/out")" >>"$OUT/$cfg.txt"
	done
	summary "$cfg"
}

run_torchrun_fabric_inner() {
	# shellcheck source-path=SCRIPTDIR source=../tests/fabric/lib.sh disable=SC1091
	. "$REPO/tests/fabric/lib.sh"
	fabric_ranks blocked
	local cfg=torchrun-fabric-m$MONITOR t d r victim= tk port=29800 is_host
	: >"$OUT/$cfg.txt"
	# torchrun resolves the hosts' names (its agents' and the workers'
	# MASTER_ADDR): each host gets a private /etc/hosts that names them.
	{
		echo "127.0.0.1 localhost"
		for ((r = 0; r < NRANKS; r++)); do
			echo "${RANK_IP[r]} ${RANK_HOST[r]}"
		done
	} >"$OUT/hosts"
	for ((t = 1; t <= TRIALS; t++)); do
		d=$OUT/$cfg/$t
		mkdir -p "$d"
		port=$((port + 1))
		local -a pids=()
		for ((r = 0; r < NRANKS; r++)); do
			is_host=$((r == 0 ? 1 : 0))
			setsid timeout -k 5 180 "$FABRIC_SH" run "${RANK_HOST[r]}" -- \
				unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$OUT/hosts" \
				env OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME="${RANK_IF[r]}" \
				"$PY" -m torch.distributed.run --nnodes 4 --nproc_per_node 1 \
				--rdzv_backend c10d --rdzv_endpoint "${RANK_IP[0]}:$port" --rdzv_id "t$t" \
				--rdzv_conf "is_host=$is_host" \
				--max_restarts 3 --monitor_interval "$MONITOR" --redirects 1 --tee 1 \
				"$HERE/torchrun_restart.py" --dir "$d" --steps 100000 \
				>"$d/out.$r" 2>"$d/err.$r" &
			pids+=($!)
		done
		if ! wait_pids "$d" 4; then
			echo "$cfg $t: the workers did not get warm"
			for r in "${pids[@]}"; do kill -TERM -- -"$r" 2>/dev/null; done
			for r in "${pids[@]}"; do wait "$r" 2>/dev/null; done
			continue
		fi
		pause
		victim=$((t % 4))
		tk=$(kill_now "$(cat "$d/pid.$victim")")
		restarted "$d" 4 || echo "$cfg $t: no step after the restart"
		for r in "${pids[@]}"; do kill -TERM -- -"$r" 2>/dev/null; done
		for r in "${pids[@]}"; do wait "$r" 2>/dev/null; done
		echo "$t $victim $(torch_times "$tk" "$d"/out.*)" >>"$OUT/$cfg.txt"
	done
	summary "$cfg"
}

if [ -n "${INNER:-}" ]; then
	case $INNER in
	fabric) run_fabric_inner ;;
	torchrun-fabric) run_torchrun_fabric_inner ;;
	esac
	exit 0
fi

fabric_with() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "$1: skipped (the namespace fabric needs root)"
		return
	fi
	"$REPO/tests/fabric/fabric.sh" with --leaves 2 --hosts-per-leaf 2 -- \
		"$0" --inner "$1" --trials "$TRIALS" --monitor "$MONITOR" "$OUT" |
		grep -v '^wf[0-9]\|^HOST \|^state: \|^fabric\.sh: \|^fabric wf'
}

echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $TRIALS trials"
case $ONLY in all | local) run_local ;; esac
case $ONLY in all | fabric) fabric_with fabric ;; esac
case $ONLY in all | torchrun) run_torchrun ;; esac
case $ONLY in all | torchrun-fabric) fabric_with torchrun-fabric ;; esac
echo "# done, load $(cut -d' ' -f1-3 /proc/loadavg)"
