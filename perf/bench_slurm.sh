#!/bin/bash
# bench_slurm.sh — how long a 4-rank job takes to initialise under each
# launcher interface, and what weft-topo sees of an interleaved Slurm job.
#
# Usage: perf/bench_slurm.sh [-r REPEAT] OUTDIR
#
# Builds perf/init_time.c (weft_launch_query + weft_comm_init_env,
# timed on every rank; the slowest rank counts) against build/libweft.so,
# brings up the fabric (2 leaves x 2 hosts) and the Slurm cluster
# (tests/fabric/slurm.sh), and runs, REPEAT times each (default 5):
#   srun --mpi=pmix -N 4 -n 4 init_time      PMIx across 4 hosts
#   srun -N 4 -n 4 init_time                 Slurm's variables, root on h1
#   salloc -N 4 -n 4 mpirun init_time        PMIx across 4 hosts (Open MPI's
#                                            daemons started through Slurm)
#   mpirun -np 4 init_time                   PMIx on this host (Open MPI)
#   mpirun -np 4 -x WEFT_PMIX=0 init_time    Open MPI's variables
# then srun --mpi=pmix -m arbitrary -w h1,h3,h2,h4 weft-topo (text and
# JSON). Writes OUTDIR/slurm-init.txt (every run, and per mode the min,
# median and max of the init time and of the launcher command's wall time)
# and OUTDIR/slurm-weft-topo.{txt,json}.
# Exit: 0 done, 1 a run failed, 77 the fabric or cluster cannot start here.
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

case ${1:-} in -h | --help) sed -n '2,/^# Exit/{s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
FABRIC_DIR=$REPO/tests/fabric
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

if [ -z "${FABRIC_STATE:-}" ]; then
	if [ ! -e "$BUILD/libweft.so" ] || [ ! -x "$BUILD/weft-topo" ]; then
		echo "error: build first (make)"
		exit 1
	fi
	exec "$FABRIC_DIR/fabric.sh" with --leaves 2 --hosts-per-leaf 2 -- "$0" "$@"
fi
[ -n "${SLURM_STATE:-}" ] || exec "$FABRIC_DIR/slurm.sh" with -- "$0" "$@"

REPEAT=5
while [ $# -gt 1 ]; do
	case $1 in
	-r) REPEAT=${2:?}; shift 2 ;;
	*) echo "usage: $0 [-r REPEAT] OUTDIR"; exit 2 ;;
	esac
done
OUTDIR=${1:?usage: $0 [-r REPEAT] OUTDIR}
mkdir -p "$OUTDIR" || exit 1
DIR=$(awk '$1 == "dir" {print $2}' "$SLURM_STATE")
BIN=$DIR/bin
cp "$BUILD/weft-topo" "$BIN/" || exit 1
cp "$BUILD/libweft.so" "$BIN/libweft.so.0" || exit 1
cc -std=gnu11 -O2 -I"$REPO/include" -o "$BIN/init_time" "$HERE/init_time.c" -L"$BIN" \
	-l:libweft.so.0 -Wl,-rpath,"$BIN" || exit 1
unset WEFT_ROOT WEFT_SECRET WEFT_RANK WEFT_NRANKS WEFT_SOCKET_IFNAME WEFT_PMIX WEFT_DEBUG
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 WEFT_LLDP=0
RAW=$OUTDIR/slurm-init.raw
: >"$RAW"

# timed MODE CMD...: one run; appends "MODE wall_ms <init_time's line>".
timed() {
	local mode=$1 t0 t1 line
	shift
	t0=$(date +%s%N)
	line=$(timeout -k 5 120 "$@" 2>"$OUTDIR/last.err" | grep '^launcher ') ||
		{ echo "run failed: $mode"; tail -n 5 "$OUTDIR/last.err"; return 1; }
	t1=$(date +%s%N)
	echo "$mode wall_ms $(((t1 - t0) / 1000000)) $line" | tee -a "$RAW"
}

rc=0
for ((i = 0; i < REPEAT; i++)); do
	timed srun-pmix "$SLURM_SH" run -- srun --chdir="$DIR" --mpi=pmix -N 4 -n 4 "$BIN/init_time" || rc=1
	timed srun-env "$SLURM_SH" run -- srun --chdir="$DIR" -N 4 -n 4 "$BIN/init_time" || rc=1
	timed mpirun-slurm "$SLURM_SH" run -- salloc -Q -N 4 -n 4 mpirun "$BIN/init_time" || rc=1
	timed mpirun-pmix mpirun --oversubscribe -np 4 "$BIN/init_time" || rc=1
	timed mpirun-env mpirun --oversubscribe -np 4 -x WEFT_PMIX=0 "$BIN/init_time" || rc=1
done
for f in text:txt json:json; do
	"$SLURM_SH" run -- srun --chdir="$DIR" --mpi=pmix -N 4 -n 4 -m arbitrary -w "h1,h3,h2,h4" \
		"$BIN/weft-topo" --format "${f%:*}" >"$OUTDIR/slurm-weft-topo.${f#*:}" \
		2>"$OUTDIR/last.err" || rc=1
done
rm -f "$OUTDIR/last.err"

{
	echo "# weft_comm_init_env of a 4-rank job: perf/bench_slurm.sh -r $REPEAT, $(date '+%F %T')"
	echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); per run the slowest rank's"
	echo "# init_ms (weft_comm_init_env) and query_ms (weft_launch_query: under PMIx it starts the"
	echo "# client), and the launcher command's wall_ms (srun or mpirun, start to exit)"
	echo "#"
	python3 - "$RAW" <<-'EOF'
		import re, statistics as st, sys
		pat = re.compile(r"(\S+) wall_ms (\d+) launcher (.+) ranks (\d+) query_ms ([\d.]+) init_ms ([\d.]+)")
		runs = {}
		for line in open(sys.argv[1]):
		    m = pat.match(line)
		    if m:
		        runs.setdefault(m[1], []).append((float(m[6]), float(m[5]), float(m[2]), m[3]))
		print("%-12s %-9s %-22s %-22s %s" % ("", "", "init_ms", "query_ms", "wall_ms"))
		print("%-12s %-9s %6s %7s %7s  %6s %7s %7s  %6s %7s %7s" % ("mode", "launcher", "min", "median",
		      "max", "min", "median", "max", "min", "median", "max"))
		for mode, rs in runs.items():
		    cols = []
		    for k in range(3):
		        v = [r[k] for r in rs]
		        cols += [min(v), st.median(v), max(v)]
		    print("%-12s %-9s %6.0f %7.0f %7.0f  %6.0f %7.0f %7.0f  %6.0f %7.0f %7.0f" % ((mode, rs[0][3]) + tuple(cols)))
	EOF
	echo "#"
	echo "# every run:"
	sed 's/^/# /' "$RAW"
} >"$OUTDIR/slurm-init.txt"
rm -f "$RAW"
cat "$OUTDIR/slurm-init.txt"
exit "$rc"
