#!/bin/bash
# test_pmix_mpirun.sh — Open MPI's mpirun on this host takes the PMIx path:
#   (a) mpirun -np 4 allreduce_perf: one 4-rank job ("nRanks 4", "launcher:
#       PMIx"), every rank's INFO line says "launcher interface PMIx", and
#       the results are exact (#wrong 0, "Out of bounds values : 0 OK");
#   (b) the same with WEFT_PMIX=0 reads Open MPI's variables instead
#       ("launcher interface environment: Open MPI"), also exact;
#   (c) weft-topo under mpirun -np 3 describes one job of 3 ranks.
# No WEFT_ROOT or WEFT_SECRET is set: under PMIx rank 0's id (with its
# fresh secret) reaches the others through the PMIx server.
# Exit: 0 pass, 1 fail, 77 skipped (no Open MPI mpirun, or Weft built
# without PMIx's headers, or libpmix missing).
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
PERF=$BUILD/allreduce_perf
TOPO=$BUILD/weft-topo
if [ ! -x "$PERF" ] || [ ! -x "$TOPO" ]; then
	echo "FAIL: $PERF or $TOPO not built"
	exit 1
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -z "$MPIRUN" ] || [[ ! $("$MPIRUN" --version 2>/dev/null) =~ (Open MPI|OpenRTE) ]]; then
	echo "SKIP: Open MPI's mpirun not found"
	exit 77
fi
pkg-config --exists pmix 2>/dev/null || { echo "SKIP: built without PMIx's headers (libpmix-dev)"; exit 77; }
[[ $(ldconfig -p 2>/dev/null) == *libpmix.so.2* ]] || { echo "SKIP: libpmix.so.2 not installed"; exit 77; }

# The PMIx path must not lean on anything a user would set by hand.
unset WEFT_ROOT WEFT_SECRET WEFT_RANK WEFT_NRANKS WEFT_PMIX WEFT_SOCKET_IFNAME
export WEFT_LLDP=0 WEFT_TIMEOUT=60
weft_test_scratch pmix-test

# run LABEL NP [VAR=VALUE ...] -- CMD...: mpirun on this host, standard output
# in OUT/LABEL and standard error (Weft's log) in OUT/LABEL.err: kept apart, a
# log line written while a rank prints its results cannot land inside a row.
run() {
	local label=$1 np=$2 t=$SECONDS
	shift 2
	local -a xs=()
	while [ "$1" != "--" ]; do
		xs+=(-x "$1")
		shift
	done
	shift
	timeout -k 5 120 "$MPIRUN" --oversubscribe -np "$np" -x WEFT_DEBUG=INFO \
		-x WEFT_DEBUG_SUBSYS=INIT "${xs[@]}" "$@" >"$OUT/$label" 2>"$OUT/$label.err"
	local rc=$?
	echo "# $label: $((SECONDS - t))s"
	return $rc
}

# check_perf FILE WANT_INTERFACE_LINE
check_perf() {
	local f=$1 want=$2 n
	grep -q "^# nRanks 4 " "$f" || { echo "not one 4-rank job"; return 1; }
	grep -qxF "# Out of bounds values : 0 OK" "$f" || { echo "results not exact"; return 1; }
	n=$(cat "$f" "$f.err" | grep -cF "$want")
	[ "$n" -eq 4 ] || { echo "$n of 4 ranks logged '$want'"; return 1; }
	awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 != 0 || $13 != 0) {bad = 1} END {exit bad}' "$f" ||
		{ echo "a #wrong column is not 0"; return 1; }
}

# (a) the PMIx path
if run pmix 4 -- "$PERF" -b 1K -e 256K -f 4 -n 3 -w 1; then
	if msg=$(check_perf "$OUT/pmix" "launcher interface PMIx: rank"); then
		grep -q "^# Backend: Weft .*launcher: PMIx" "$OUT/pmix" ||
			fail "PMIx: the header does not say 'launcher: PMIx'"
		echo "ok: mpirun -np 4 allreduce_perf: one exact 4-rank job over PMIx"
		grep -m1 "launcher interface PMIx" "$OUT/pmix.err" | sed 's/^/#   /'
	else
		fail "PMIx: $msg"
	fi
else
	fail "mpirun -np 4 allreduce_perf failed"
fi
[ "$FAILS" -eq 0 ] || cat "$OUT/pmix" "$OUT/pmix.err" | sed 's/^/    | /' | tail -n 40

# (b) WEFT_PMIX=0: Open MPI's variables
if run env 4 WEFT_PMIX=0 -- "$PERF" -b 1K -e 256K -f 4 -n 3 -w 1; then
	if msg=$(check_perf "$OUT/env" "launcher interface environment: Open MPI rank"); then
		echo "ok: WEFT_PMIX=0 reads Open MPI's variables, exact"
	else
		fail "WEFT_PMIX=0: $msg"
		cat "$OUT/env" "$OUT/env.err" | sed 's/^/    | /' | tail -n 40
	fi
else
	fail "mpirun -np 4 allreduce_perf with WEFT_PMIX=0 failed"
	sed 's/^/    | /' "$OUT/env" | tail -n 30
fi

# (c) weft-topo: one job of three ranks
if run topo 3 WEFT_DEBUG=WARN -- "$TOPO" --format json; then
	if python3 -c '
import json, sys
t = open(sys.argv[1]).read()
d = json.loads(t[t.index("{"):t.rindex("}") + 1])
sys.exit(None if d.get("nranks") == 3 else "nranks %r" % d.get("nranks"))' "$OUT/topo"; then
		echo "ok: weft-topo under mpirun -np 3 describes one 3-rank job"
	else
		fail "weft-topo under mpirun: not one 3-rank job"
		head -n 20 "$OUT/topo" | sed 's/^/    | /'
	fi
else
	fail "mpirun -np 3 weft-topo failed"
	tail -n 20 "$OUT/topo" | sed 's/^/    | /'
fi

weft_test_end test_pmix_mpirun
