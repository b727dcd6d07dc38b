#!/bin/bash
# test_fabric_topo.sh — Weft across a leaf/spine fabric of network namespaces.
#
# Builds 2 leaves x 2 hosts with tests/fabric/fabric.sh and runs 4 ranks, one
# per host namespace, rank numbers interleaved across the leaves:
#   rank 0 -> leaf1's 1st host, rank 1 -> leaf2's 1st host,
#   rank 2 -> leaf1's 2nd host, rank 3 -> leaf2's 2nd host.
# Each rank runs (via `fabric.sh run`, i.e. ip netns exec in its host's
# namespace) as
#   env WEFT_RANK=r WEFT_NRANKS=4 WEFT_ROOT=<rank 0 IP>:<port> WEFT_SECRET=<hex>
#       WEFT_SOCKET_IFNAME=<veth> WEFT_LLDP_SOCKET=<host's lldpd socket> CMD
# Checks
#   (a) build/weft-topo --format json: every rank's leaf learned through LLDP
#       (leaf1/leaf2, leaf_source "lldp"), ring leaf_crossings == 2, and == 4
#       with WEFT_PLACEMENT=rank;
#   (b) build/allreduce_perf -b 1K -e 1M -f 4 -n 5 -w 2 (default placement and
#       WEFT_PLACEMENT=rank): every rank exits 0, "# Out of bounds values : 0 OK",
#       every #wrong column 0;
#   (c) the same AllReduce with WEFT_TRANSPORTS=ofi over tcp;ofi_rxm, the
#       provider pinned to each namespace's veth (FI_TCP_IFACE);
#   (d) the blocks of README.md and docs/ marked "hosts N" (tests/docs/):
#       host k of the first N runs the block, WEFT_RANK=0 made WEFT_RANK=k-1,
#       10.0.0.1 the first host's address, eth0 the host's own interface,
#       with one WEFT_SECRET for the job; every host's run exits 0.
# Exit: 0 pass, 1 fail, 77 skipped (not root, ip/tc/lldpd missing, ...).
# The fabric is always torn down (fabric.sh with). Set WEFT_BUILD to test
# another build directory (default: build, relative to the repository);
# FABRIC_JOB_TIMEOUT bounds each job (default 120 s).
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
FABRIC=$HERE/fabric.sh
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

# Outside a fabric: build one, re-run this script inside it, tear it down.
if [ -z "${FABRIC_STATE:-}" ]; then
	[ -x "$BUILD/allreduce_perf" ] || {
		echo "FAIL: $BUILD/allreduce_perf not built (make $BUILD/allreduce_perf)"
		exit 1
	}
	command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
	command -v timeout >/dev/null 2>&1 || { echo "SKIP: timeout(1) not found"; exit 77; }
	exec "$FABRIC" with --leaves 2 --hosts-per-leaf 2 -- "$0" "$@"
fi

T0=$SECONDS
OUT=$(mktemp -d /tmp/weft-fabric-test.XXXXXX)
FAILS=0
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$HERE/lib.sh"
fabric_ranks interleaved
[ "$NRANKS" -eq 4 ] || { echo "FAIL: expected 4 hosts in the fabric, found $NRANKS"; exit 1; }
echo "# ranks:"
fabric_print_ranks
trap 'fabric_kill_ranks; exit 130' INT
trap 'fabric_kill_ranks; exit 143' TERM

# check_topo JSONFILE EXPECTED_CROSSINGS
check_topo() {
	python3 - "$1" "$2" "${RANK_LEAF[@]}" <<-'EOF'
		import json, sys
		path, want_cross, leaves = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
		text = open(path).read()
		try:
		    doc = json.loads(text)
		except ValueError:
		    try:  # tolerate lines around the JSON object
		        doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
		    except ValueError as e:
		        sys.exit("weft-topo output is not JSON (%s): %r" % (e, text[:300]))
		errs = []
		def name(v):
		    if isinstance(v, dict):
		        return v.get("name") or v.get("id") or v.get("chassis_id")
		    return v
		ranks = {r.get("rank"): r for r in doc.get("ranks", [])}
		if sorted(ranks) != list(range(len(leaves))):
		    errs.append("ranks %s, expected 0..%d" % (sorted(ranks), len(leaves) - 1))
		hosts = set()
		for r, want in enumerate(leaves):
		    e = ranks.get(r)
		    if e is None:
		        continue
		    hosts.add(str(e.get("host")))
		    got = name(e.get("leaf"))
		    if got != want:
		        errs.append("rank %d: leaf %r, expected %r" % (r, got, want))
		    if e.get("leaf_source") != "lldp":
		        errs.append("rank %d: leaf_source %r, expected 'lldp'" % (r, e.get("leaf_source")))
		if len(hosts) != len(leaves):
		    errs.append("%d distinct hosts %s, expected %d" % (len(hosts), sorted(hosts), len(leaves)))
		ring = doc.get("ring", {})
		order = ring.get("order")
		if not isinstance(order, list) or sorted(order) != list(range(len(leaves))):
		    errs.append("ring order %r is not a permutation of the ranks" % (order,))
		else:
		    n = len(order)
		    cross = sum(leaves[order[i]] != leaves[order[(i + 1) % n]] for i in range(n))
		    if cross != want_cross:
		        errs.append("ring order %r crosses leaves %d times, expected %d" % (order, cross, want_cross))
		if ring.get("leaf_crossings") != want_cross:
		    errs.append("ring leaf_crossings %r, expected %d" % (ring.get("leaf_crossings"), want_cross))
		if errs:
		    sys.exit("\n".join(errs))
		print("ring order %s, leaf_crossings %d, leaves %s" % (order, want_cross, sorted(set(leaves))))
	EOF
}

# check_perf FILE
check_perf() {
	python3 - "$1" <<-'EOF'
		import sys
		lines = open(sys.argv[1]).read().splitlines()
		errs = []
		if "# Out of bounds values : 0 OK" not in [l.rstrip() for l in lines]:
		    errs.append("no '# Out of bounds values : 0 OK' line")
		rows = [l.split() for l in lines if l.strip() and not l.lstrip().startswith("#")]
		rows = [f for f in rows if f[0].isdigit()]
		if len(rows) != 6:
		    errs.append("%d result rows, expected 6 (1K..1M by 4)" % len(rows))
		for f in rows:
		    if len(f) < 13 or f[8] != "0" or f[12] != "0":
		        errs.append("bad row (#wrong must be 0): %s" % " ".join(f))
		if errs:
		    sys.exit("\n".join(errs))
		print("%d sizes, 0 wrong" % len(rows))
	EOF
}

# (a) weft-topo
TOPO=$BUILD/weft-topo
if [ ! -x "$TOPO" ]; then
	fail "weft-topo: $TOPO is missing (make $TOPO); topology checks not run"
else
	port=29511
	for mode in default rank; do
		penv=()
		want=2
		if [ "$mode" = rank ]; then penv=(WEFT_PLACEMENT=rank); want=4; fi
		if fabric_run_job "$OUT" "topo-$mode" "$port" "${penv[@]}" -- "$TOPO" --format json; then
			if msg=$(check_topo "$OUT/topo-$mode.0.out" "$want" 2>&1); then
				echo "ok: weft-topo placement=$mode: $msg"
			else
				fail "weft-topo placement=$mode:"
				printf '%s\n' "$msg" | sed 's/^/    /'
				sed 's/^/    | /' "$OUT/topo-$mode.0.out" | head -n 60
			fi
		else
			fail "weft-topo placement=$mode: a rank failed"
		fi
		port=$((port + 1))
	done
fi

# (b) AllReduce across the namespaces, both ring orders
port=29521
for mode in default rank; do
	penv=()
	[ "$mode" = rank ] && penv=(WEFT_PLACEMENT=rank)
	if fabric_run_job "$OUT" "allreduce-$mode" "$port" "${penv[@]}" -- \
		"$BUILD/allreduce_perf" -b 1K -e 1M -f 4 -n 5 -w 2; then
		if msg=$(check_perf "$OUT/allreduce-$mode.0.out" 2>&1); then
			echo "ok: allreduce_perf placement=$mode: $msg"
		else
			fail "allreduce_perf placement=$mode:"
			printf '%s\n' "$msg" | sed 's/^/    /'
			sed 's/^/    | /' "$OUT/allreduce-$mode.0.out"
		fi
	else
		fail "allreduce_perf placement=$mode: a rank failed"
		sed 's/^/    | /' "$OUT/allreduce-$mode.0.out" | tail -n 20
	fi
	port=$((port + 1))
done

# (c) AllReduce over libfabric (tcp;ofi_rxm) across the namespaces
if fabric_run_job "$OUT" allreduce-ofi 29531 WEFT_TRANSPORTS=ofi "WEFT_OFI_PROVIDER=tcp;ofi_rxm" -- \
	"$BUILD/allreduce_perf" -b 1K -e 1M -f 4 -n 5 -w 2; then
	if msg=$(check_perf "$OUT/allreduce-ofi.0.out" 2>&1); then
		echo "ok: allreduce_perf over ofi (tcp;ofi_rxm): $msg"
	else
		fail "allreduce_perf over ofi:"
		printf '%s\n' "$msg" | sed 's/^/    /'
		sed 's/^/    | /' "$OUT/allreduce-ofi.0.out"
	fi
else
	fail "allreduce_perf over ofi: a rank failed"
	sed 's/^/    | /' "$OUT/allreduce-ofi.0.out" "$OUT/allreduce-ofi.0.err" | tail -n 20
fi

# (d) the docs' blocks for several hosts
docs_hosts_block() {
	local f=$1 n where r st rc=0
	n=${f%.sh}
	n=${n##*.}
	where=$(head -n 1 "$f" | cut -c3-)
	local -a pids=()
	for ((r = 0; r < n; r++)); do
		sed -e '1d' -e "s/WEFT_RANK=0/WEFT_RANK=$r/g" -e "s/10\.0\.0\.1/${RANK_IP[0]}/g" \
			-e "s/\beth0\b/${RANK_IF[r]}/g" "$f" >"$f.$r"
		(cd "$REPO" && timeout -k 5 "$FABRIC_JOB_TIMEOUT" "$FABRIC" run "${RANK_HOST[r]}" -- \
			env WEFT_SECRET="$FABRIC_SECRET" bash -e -o pipefail "$f.$r") >"$f.$r.out" 2>&1 &
		pids+=($!)
	done
	for ((r = 0; r < n; r++)); do
		st=0
		wait "${pids[r]}" || st=$?
		[ "$st" -eq 0 ] || { rc=1; echo "# $where: host $((r + 1)) exited $st:"; tail -n 15 "$f.$r.out" | sed 's/^/#   /'; }
	done
	if [ "$rc" -eq 0 ]; then
		echo "ok: docs: $where, on $n hosts"
	else
		fail "docs: $where, on $n hosts"
	fi
}
mkdir -p "$OUT/docs"
for f in $(cd "$REPO" && python3 tests/docs/blocks.py write hosts "$OUT/docs"); do
	docs_hosts_block "$f"
done

echo "# test time: $((SECONDS - T0))s (fabric up/down not included)"
if [ "$FAILS" -eq 0 ]; then
	rm -rf -- "$OUT"
	echo "PASS: test_fabric_topo"
	exit 0
fi
echo "# outputs kept in $OUT"
echo "FAIL: test_fabric_topo ($FAILS failed)"
exit 1
