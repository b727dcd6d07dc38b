#!/bin/bash
# test_python_fabric.sh — the Python package and the torch backend across
# two hosts: network namespaces of a tests/fabric/fabric.sh fabric (one
# leaf, two hosts, addresses only inside the namespaces).
#
#  (a) weft.get_unique_id() with neither WEFT_ROOT nor WEFT_SOCKET_IFNAME
#      set: rank 0 in host 1 creates the id (its root must listen on the
#      NIC nearest its cores, the host's veth, not on 127.0.0.1) and hands
#      it over a file; rank 1 in host 2 joins; an allreduce checks the job
#      (tests/python/fabric_ranks.py uid);
#  (b) DDP for 20 steps on weft and on gloo gives the same losses and
#      parameters (tests/python/bodies_ddp.py), the c10d store on host 1's
#      address, Weft's interfaces chosen by itself (WEFT_SOCKET_IFNAME
#      unset), Gloo's named (GLOO_SOCKET_IFNAME=eth0).
# Exit: 0 pass, 1 fail, 77 skipped (not root, fabric tools or torch missing).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

if [ -z "${FABRIC_STATE:-}" ]; then
	[ -f "$BUILD/libweft.so" ] || { echo "FAIL: $BUILD/libweft.so not built"; exit 1; }
	"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY has no numpy"; exit 77; }
	command -v timeout >/dev/null 2>&1 || { echo "SKIP: timeout(1) not found"; exit 77; }
	exec "$HERE/fabric.sh" with --leaves 1 --hosts-per-leaf 2 -- "$0" "$@"
fi

# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$HERE/lib.sh"
fabric_ranks blocked
[ "$NRANKS" -eq 2 ] || { echo "FAIL: expected 2 hosts in the fabric, found $NRANKS"; exit 1; }
OUT=$(mktemp -d /tmp/weft-pyfabric.XXXXXX)
export PYTHONPATH="$REPO/python:$REPO/tests/python" WEFT_BUILD="$BUILD" OMP_NUM_THREADS=1
FAILS=0

# Both ranks at once, each in its host; fails if either fails or overruns.
job() {
	local label=$1 r rc=0
	shift
	local -a pids=()
	for r in 0 1; do
		timeout -k 5 240 "$HERE/fabric.sh" run "${RANK_HOST[r]}" -- \
			env -u WEFT_SOCKET_IFNAME -u WEFT_ROOT -u WEFT_RANK -u WEFT_NRANKS \
			RANK="$r" WORLD_SIZE=2 GLOO_SOCKET_IFNAME="${RANK_IF[r]}" \
			"$PY" "$REPO/tests/python/fabric_ranks.py" "$@" >"$OUT/$label.$r.out" 2>&1 &
		pids+=($!)
		set -- "${@:1:1}" "$(($2 + 1))" "${@:3}"
	done
	for r in 0 1; do
		wait "${pids[r]}" || rc=1
		tail -n 3 "$OUT/$label.$r.out" | sed "s/^/#   $label $r: /"
	done
	[ "$rc" -eq 0 ] || { echo "FAIL: $label"; FAILS=$((FAILS + 1)); }
}

echo "# hosts: ${RANK_HOST[0]} ${RANK_IP[0]}, ${RANK_HOST[1]} ${RANK_IP[1]}"
job uid uid 0 "$OUT/unique_id"
if "$PY" -c 'import torch' 2>/dev/null && ls "$REPO"/python/weft/_torch_ext*.so >/dev/null 2>&1; then
	job ddp ddp 0 "${RANK_IP[0]}:29517"
else
	echo "# skipping (b): torch or the weft torch extension (make python) is missing"
fi
rm -rf "$OUT"
[ "$FAILS" -eq 0 ] && echo "PASS: python fabric" && exit 0
exit 1
