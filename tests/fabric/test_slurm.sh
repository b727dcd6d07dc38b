#!/bin/bash
# test_slurm.sh — Weft under a real Slurm cluster (tests/fabric/slurm.sh) on a
# fabric of 2 leaves x 2 hosts (tests/fabric/fabric.sh): slurmctld, one
# slurmd per host namespace, topology/tree from the fabric's leaves. Checks
#   (a) srun --mpi=pmix -N 4 -n 4 allreduce_perf is one 4-rank job ("nRanks
#       4", "launcher: PMIx", every rank's INFO line "launcher interface
#       PMIx") and exact (#wrong 0), with nothing set by hand;
#   (b) srun --mpi=pmix -m arbitrary -w h1,h3,h2,h4 weft-topo --format json
#       (rank numbers interleaved across the leaves): every rank's leaf and
#       spine learned from Slurm (via "slurm"), two leaves under one spine,
#       and a ring that crosses leaves twice (once per leaf);
#   (c) the leaf sources on the real cluster: with every node's lldpd
#       socket, LLDP wins (its leaves take Slurm's spine, which names them
#       too); with lldpd on three nodes only, the job agrees on Slurm, the
#       one source all ranks know, says so, and still sees two leaves;
#   (d) plain srun (no PMIx): -N 4 -n 4 (block: rank 0 on the first node,
#       whose name resolves on the nodes) is one exact 4-rank job read from
#       Slurm's variables; -m arbitrary fails on every rank with the message
#       that says to use srun --mpi=pmix or WEFT_ROOT; -N 1 -n 2 weft-topo
#       (issue 14's "srun -n 2 on one node") is one 2-rank job;
#   (d2) Slurm's compressed tasks-per-node list, live: -N 3 -n 5 gives
#       SLURM_STEP_TASKS_PER_NODE=2(x2),1, and weft-topo --launcher on every
#       task, with plain srun, --mpi=pmix and --mpi=pmi2 (whose PMI_RANK is
#       Slurm's, not Hydra's), reports the local rank and size that the
#       tasks' host names show;
#   (e) sbatch --wait docs/slurm/torchrun.sbatch (docs/pytorch.md's PyTorch job:
#       torchrun under srun --mpi=pmix, when torch is installed): the workers
#       inherit their agent's PMIx variables, and torchrun's win;
#   (f) sbatch --wait docs/slurm/allreduce.sbatch (the perf run of docs/launching.md);
#   (g) sbatch --wait docs/slurm/mpirun.sbatch: Open MPI's mpirun inside the
#       allocation, its daemons started through Slurm, is one exact 4-rank
#       job over PMIx across the 4 nodes;
#   (h) the blocks of README.md and docs/ marked "slurm" (tests/docs/):
#       each runs, srun on the cluster and build/ its copy of the programs;
#       sbatch may name only a script (e)-(g) ran and passed;
#   (i) srun --no-kill -K0 --mpi=pmix -N 4 -n 4 shrink_bench: one task is
#       killed (SIGKILL) and Slurm leaves the others running, which shrink
#       their communicator and finish as 3; with -K1 Slurm ends the step
#       instead, and they do not finish (docs/launching.md, "Losing a rank").
# The programs are copied into the cluster's bin/ (the nodes have a private
# /tmp). Exit: 0 pass, 1 fail, 77 skipped (not root, Slurm, munge or the
# fabric's tools missing, or the cluster does not start here). Everything is
# torn down (fabric.sh with, slurm.sh with). WEFT_BUILD: the build directory
# (default build); SLURM_JOB_TIMEOUT bounds each step (default 120 s).
# shellcheck disable=SC2317  # trap handlers are reached indirectly

set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${WEFT_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
JOB_TIMEOUT=${SLURM_JOB_TIMEOUT:-120}

if [ -z "${FABRIC_STATE:-}" ]; then
	for f in allreduce_perf weft-topo shrink_bench libweft.so; do
		[ -e "$BUILD/$f" ] || { echo "FAIL: $BUILD/$f not built"; exit 1; }
	done
	command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
	command -v srun >/dev/null 2>&1 || { echo "SKIP: srun not found (install slurm-wlm)"; exit 77; }
	exec "$HERE/fabric.sh" with --leaves 2 --hosts-per-leaf 2 -- "$0" "$@"
fi
if [ -z "${SLURM_STATE:-}" ]; then
	exec "$HERE/slurm.sh" with -- "$0" "$@"
fi

T0=$SECONDS
DIR=$(awk '$1 == "dir" {print $2}' "$SLURM_STATE")
BIN=$DIR/bin
OUT=$(mktemp -d /tmp/weft-slurm-test.XXXXXX)
FAILS=0
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
ok() { echo "ok: $*"; }
show() {
	sed 's/^/    | /' "$1" | tail -n "${2:-25}"
	[ ! -s "$1.err" ] || sed 's/^/    ! /' "$1.err" | tail -n "${2:-25}"
}

if ! cp "$BUILD/allreduce_perf" "$BUILD/weft-topo" "$BUILD/shrink_bench" "$BIN/" ||
	! cp "$BUILD/libweft.so" "$BIN/libweft.so.0"; then
	echo "FAIL: cannot copy the programs into $BIN"
	exit 1
fi
# lldp-on CMD: CMD with the node's lldpd socket, except on $WEFT_TEST_NO_LLDP.
# shellcheck disable=SC2016  # the script's own variables
{
	echo '#!/bin/sh'
	echo 'case $SLURMD_NODENAME in'
	awk '$1 == "node" {printf "%s) sock=%s ;;\n", $2, $6}' "$SLURM_STATE"
	echo 'esac'
	echo '[ "$SLURMD_NODENAME" = "${WEFT_TEST_NO_LLDP:-}" ] || export WEFT_LLDP_SOCKET=$sock'
	echo 'exec "$@"'
} >"$BIN/lldp-on"
chmod +x "$BIN/lldp-on"

# Nothing a user would set by hand; LLDP only where a check asks for it.
unset WEFT_ROOT WEFT_SECRET WEFT_RANK WEFT_NRANKS WEFT_SOCKET_IFNAME WEFT_TOPO_FILE WEFT_PMIX
unset WEFT_LLDP_SOCKET WEFT_DEBUG WEFT_DEBUG_SUBSYS
export WEFT_TIMEOUT=60

# step LABEL SRUN_ARGS... : srun on the cluster, the tasks' stdout in
# OUT/LABEL and their stderr (logs, errors) in OUT/LABEL.err: srun mixes the
# tasks' lines, which must not land inside rank 0's JSON.
step() {
	local label=$1 t=$SECONDS rc
	shift
	timeout -k 5 "$JOB_TIMEOUT" "$SLURM_SH" run -- srun --chdir="$DIR" "$@" \
		>"$OUT/$label" 2>"$OUT/$label.err"
	rc=$?
	echo "# $label: $((SECONDS - t))s (exit $rc)"
	return $rc
}

# check_perf FILE NRANKS LAUNCHER [INTERFACE_LINE]: one exact job; lines may
# carry torchrun's "[default0]:" prefix.
check_perf() {
	local f=$1 n=$2 launcher=$3 want=${4:-} got
	grep -q "# nRanks $n " "$f" || { echo "not one $n-rank job"; return 1; }
	grep -q "# Backend: Weft .*launcher: $launcher)" "$f" || { echo "launcher is not $launcher"; return 1; }
	grep -qF "# Out of bounds values : 0 OK" "$f" || { echo "results not exact"; return 1; }
	sed 's/^\[[a-z0-9]*\]://' "$f" |
		awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 != 0 || $13 != 0) {bad = 1} END {exit bad}' ||
		{ echo "a #wrong column is not 0"; return 1; }
	[ -n "$want" ] || return 0
	got=$(cat "$f" "$f.err" 2>/dev/null | grep -cF "$want")
	[ "$got" -eq "$n" ] || { echo "$got of $n ranks logged '$want'"; return 1; }
}

# check_topo FILE SOURCE: interleaved ranks, both leaves via SOURCE under
# one spine (from Slurm, also for LLDP's leaves: the fabric's lldpd names the
# leaves as topology.conf does), ring crossing leaves twice.
check_topo() {
	python3 - "$1" "$2" <<-'EOF'
		import json, sys
		text = open(sys.argv[1]).read()
		try:
		    doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
		except ValueError as e:
		    sys.exit("not JSON (%s): %r" % (e, text[:300]))
		want_src = sys.argv[2]
		errs = []
		leaves = {0: "leaf1", 1: "leaf2", 2: "leaf1", 3: "leaf2"}
		hosts = {0: "h1", 1: "h3", 2: "h2", 3: "h4"}
		ranks = {r["rank"]: r for r in doc.get("ranks", [])}
		if sorted(ranks) != [0, 1, 2, 3]:
		    errs.append("ranks %s, expected 0..3" % sorted(ranks))
		for r, e in sorted(ranks.items()):
		    if (e.get("leaf"), e.get("leaf_source"), e.get("hostname")) != (leaves.get(r), want_src, hosts.get(r)):
		        errs.append("rank %d: %s leaf %r via %r, expected %s %s via %s" % (r, e.get("hostname"),
		                    e.get("leaf"), e.get("leaf_source"), hosts.get(r), leaves.get(r), want_src))
		    if e.get("spine") != "spine":
		        errs.append("rank %d: spine %r, expected 'spine'" % (r, e.get("spine")))
		if doc.get("nleaves") != 2:
		    errs.append("%r leaves, expected 2" % doc.get("nleaves"))
		if doc.get("nspines") != 1:
		    errs.append("%r spines, expected 1" % doc.get("nspines"))
		ring = doc.get("ring", {})
		if ring.get("leaf_crossings") != 2:
		    errs.append("ring %r crosses leaves %r times, expected 2" % (ring.get("order"), ring.get("leaf_crossings")))
		if errs:
		    sys.exit("\n".join(errs))
		print("ring %s, 2 leaves via %s, 2 crossings" % (ring.get("order"), want_src))
	EOF
}

PERF_ARGS=(-b 1K -e 1M -f 4 -n 5 -w 2)
INTERLEAVED=(-N 4 -n 4 -m arbitrary -w "h1,h3,h2,h4")

# (a) srun --mpi=pmix: one 4-rank job, exact
if step pmix-perf --mpi=pmix -N 4 -n 4 --export=ALL,WEFT_DEBUG=INFO,WEFT_DEBUG_SUBSYS=INIT \
	"$BIN/allreduce_perf" "${PERF_ARGS[@]}"; then
	if msg=$(check_perf "$OUT/pmix-perf" 4 PMIx "launcher interface PMIx: rank"); then
		ok "srun --mpi=pmix -N 4 -n 4 allreduce_perf: one exact 4-rank job over PMIx"
	else
		fail "srun --mpi=pmix allreduce_perf: $msg"
		show "$OUT/pmix-perf"
	fi
else
	fail "srun --mpi=pmix -N 4 -n 4 allreduce_perf failed"
	show "$OUT/pmix-perf"
fi

# (b) weft-topo with interleaved ranks: the leaves and the spine from Slurm
if step pmix-topo --mpi=pmix "${INTERLEAVED[@]}" "$BIN/weft-topo" --format json; then
	if msg=$(check_topo "$OUT/pmix-topo" slurm 2>&1); then
		ok "weft-topo, ranks interleaved (-w h1,h3,h2,h4): $msg"
	else
		fail "weft-topo under srun --mpi=pmix:"
		printf '%s\n' "$msg" | sed 's/^/    /'
	fi
else
	fail "srun --mpi=pmix weft-topo failed"
	show "$OUT/pmix-topo"
fi

# (c) LLDP where every node has it; Slurm for all when one node lacks it
if step lldp-topo --mpi=pmix "${INTERLEAVED[@]}" "$BIN/lldp-on" "$BIN/weft-topo" --format json &&
	msg=$(check_topo "$OUT/lldp-topo" lldp 2>&1); then
	ok "lldpd on every node: LLDP wins"
else
	fail "lldpd on every node: ${msg:-the step failed}"
	show "$OUT/lldp-topo"
fi
if WEFT_TEST_NO_LLDP=h4 step mixed-topo --mpi=pmix "${INTERLEAVED[@]}" \
	--export=ALL,WEFT_DEBUG=INFO,WEFT_DEBUG_SUBSYS=TOPO "$BIN/lldp-on" "$BIN/weft-topo" \
	--format json && msg=$(check_topo "$OUT/mixed-topo" slurm 2>&1); then
	if grep -q "leaf sources differ across the 4 ranks (lldp on 3, slurm on 1): every rank uses slurm" \
		"$OUT/mixed-topo.err"; then
		ok "lldpd on 3 of 4 nodes: the job agrees on Slurm, and says why"
	else
		fail "lldpd on 3 of 4 nodes: no INFO line saying which source won and why"
	fi
else
	fail "lldpd on 3 of 4 nodes: ${msg:-the step failed}"
	show "$OUT/mixed-topo"
fi

# (d) plain srun: the environment path. Without PMIx nothing hands the
# ranks a key: across hosts each must refuse the guessable one derived
# from the job id, naming the ways to give one; given WEFT_SECRET (the
# batch script's way, docs/launching.md), the job runs.
if step env-nokey -N 4 -n 4 "$BIN/allreduce_perf" "${PERF_ARGS[@]}"; then
	fail "plain srun -N 4 -n 4 without a key succeeded: it used a guessable key"
else
	n=$(grep -c "weft_comm_init_env failed: .*no key for a job across hosts.*WEFT_SECRET_FILE.*WEFT_ALLOW_DERIVED_SECRET=1" \
		"$OUT/env-nokey.err")
	if [ "$n" -eq 4 ]; then
		ok "plain srun -N 4 -n 4 without a key: every rank refuses the derived one, naming the ways to give one"
	else
		fail "plain srun -N 4 -n 4 without a key: $n of 4 ranks gave the message"
		show "$OUT/env-nokey"
	fi
fi
key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
if step env-perf -N 4 -n 4 --export=ALL,WEFT_SECRET="$key",WEFT_DEBUG=INFO,WEFT_DEBUG_SUBSYS=INIT \
	"$BIN/allreduce_perf" "${PERF_ARGS[@]}" &&
	msg=$(check_perf "$OUT/env-perf" 4 Slurm "launcher interface environment: Slurm rank"); then
	ok "plain srun -N 4 -n 4 allreduce_perf with WEFT_SECRET: one exact 4-rank job from Slurm's variables"
else
	fail "plain srun -N 4 -n 4 with WEFT_SECRET: ${msg:-the step failed}"
	show "$OUT/env-perf"
fi
if step env-arbitrary "${INTERLEAVED[@]}" "$BIN/allreduce_perf" "${PERF_ARGS[@]}"; then
	fail "plain srun -m arbitrary succeeded: it cannot know rank 0's node"
else
	n=$(grep -c "weft_comm_init_env failed: .*SLURM_DISTRIBUTION=arbitrary.*srun --mpi=pmix.*WEFT_ROOT=host:port" \
		"$OUT/env-arbitrary.err")
	if [ "$n" -eq 4 ]; then
		ok "plain srun -m arbitrary: every rank fails saying to use srun --mpi=pmix or WEFT_ROOT"
	else
		fail "plain srun -m arbitrary: $n of 4 ranks gave the message"
		show "$OUT/env-arbitrary"
	fi
fi
if step env-one-node -N 1 -n 2 -O "$BIN/weft-topo" --format json &&
	python3 -c '
import json, sys
t = open(sys.argv[1]).read()
d = json.loads(t[t.index("{"):t.rindex("}") + 1])
sys.exit(None if (d["nranks"], d["nhosts"]) == (2, 1) else "%d ranks on %d hosts" % (d["nranks"], d["nhosts"]))' \
		"$OUT/env-one-node"; then
	ok "plain srun -N 1 -n 2 weft-topo: one 2-rank job on one host"
else
	fail "plain srun -N 1 -n 2 weft-topo"
	show "$OUT/env-one-node"
fi

# (d2) -N 3 -n 5: "2(x2),1"; check_local FILE LAUNCHER: every task read
# LAUNCHER, and its local rank and size are what the host names of the
# tasks show (block: ranks in order on each host).
check_local() {
	python3 - "$1" "$2" <<-'EOF'
		import sys
		rows = [l.split() for l in open(sys.argv[1]) if l.startswith("launcher ")]
		rows = [dict(zip(r[0::2], r[1::2])) for r in rows]
		errs = [] if len(rows) == 5 else ["%d lines, expected 5" % len(rows)]
		errs += ["rank %s read launcher %s, expected %s" % (r["rank"], r["launcher"], sys.argv[2])
		         for r in rows if r["launcher"] != sys.argv[2]]
		by_host = {}
		for r in sorted(rows, key=lambda r: int(r["rank"])):
		    by_host.setdefault(r["host"], []).append(r)
		for host, rs in by_host.items():
		    for i, r in enumerate(rs):
		        want = (str(i), str(len(rs)), "5")
		        if (r["local_rank"], r["local_size"], r["nranks"]) != want:
		            errs.append("rank %s on %s: local %s of %s, nranks %s; expected local %s of %s" %
		                        (r["rank"], host, r["local_rank"], r["local_size"], r["nranks"], want[0], want[1]))
		if sorted(len(rs) for rs in by_host.values()) != [1, 2, 2]:
		    errs.append("tasks per host %s, expected 2, 2, 1" % {h: len(rs) for h, rs in by_host.items()})
		sys.exit("\n".join(errs) or None)
	EOF
}
if step tpn-env -N 3 -n 5 printenv SLURM_STEP_TASKS_PER_NODE &&
	[ "$(sort -u "$OUT/tpn-env")" = "2(x2),1" ]; then
	for mpi in none pmix pmi2; do
		if step "tpn-$mpi" --mpi="$mpi" -N 3 -n 5 "$BIN/weft-topo" --launcher &&
			msg=$(check_local "$OUT/tpn-$mpi" "$([ $mpi = pmix ] && echo PMIx || echo Slurm)" 2>&1); then
			ok "srun --mpi=$mpi -N 3 -n 5 (tasks per node 2(x2),1): every task's local rank and size"
		else
			fail "srun --mpi=$mpi -N 3 -n 5 weft-topo --launcher: ${msg:-the step failed}"
			show "$OUT/tpn-$mpi"
		fi
	done
else
	fail "srun -N 3 -n 5 does not give SLURM_STEP_TASKS_PER_NODE=2(x2),1: $(sort -u "$OUT/tpn-env")"
fi

# batch LABEL SCRIPT ARGS...: sbatch --wait, standard output in OUT/LABEL and
# standard error (Weft's log) apart in OUT/LABEL.err, as step() keeps them.
batch() {
	local label=$1 script=$2 t=$SECONDS rc
	shift 2
	timeout -k 5 "$JOB_TIMEOUT" "$SLURM_SH" run -- sbatch --wait --chdir="$DIR" \
		-o "$DIR/$label.out" -e "$DIR/$label.err" "$script" "$@" >"$OUT/$label.sbatch" 2>&1
	rc=$?
	cp "$DIR/$label.out" "$OUT/$label" 2>/dev/null || : >"$OUT/$label"
	cp "$DIR/$label.err" "$OUT/$label.err" 2>/dev/null || : >"$OUT/$label.err"
	echo "# $label: $((SECONDS - t))s (exit $rc)"
	return $rc
}

# (e) docs/pytorch.md's PyTorch script: torchrun under srun --mpi=pmix, whose
# workers' torchrun variables must win over the PMIx ones they inherit
TORCH_PY=/usr/bin/python3
# find_spec does not import torch (which takes seconds).
if ! "$TORCH_PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null; then
	echo "# skipped: docs/slurm/torchrun.sbatch (no torch for $TORCH_PY)"
elif PYTHON=$TORCH_PY WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=INIT batch torchrun \
	"$REPO/docs/slurm/torchrun.sbatch" --no_python "$BIN/allreduce_perf" -b 1K -e 64K -f 4 -n 3 -w 1 &&
	msg=$(check_perf "$OUT/torchrun" 2 torchrun "launcher interface environment: torchrun rank"); then
	ok "sbatch docs/slurm/torchrun.sbatch: torchrun's ranks, not PMIx's; one exact 2-rank job"
	echo docs/slurm/torchrun.sbatch >>"$OUT/sbatch-ok"
else
	fail "sbatch docs/slurm/torchrun.sbatch: ${msg:-the job failed}"
	show "$OUT/torchrun.sbatch" 5
	show "$OUT/torchrun"
fi

# (f) docs/launching.md's AllReduce script
if WEFT_BIN=$BIN batch allreduce "$REPO/docs/slurm/allreduce.sbatch" -b 1K -e 64K -f 4 -n 3 -w 1 &&
	msg=$(check_perf "$OUT/allreduce" 4 PMIx); then
	ok "sbatch docs/slurm/allreduce.sbatch: one exact 4-rank job"
	echo docs/slurm/allreduce.sbatch >>"$OUT/sbatch-ok"
else
	fail "sbatch docs/slurm/allreduce.sbatch: ${msg:-the job failed}"
	show "$OUT/allreduce.sbatch" 5
	show "$OUT/allreduce"
fi

# (g) Open MPI's mpirun inside the allocation: PMIx across the nodes
if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 WEFT_DEBUG=INFO \
	WEFT_DEBUG_SUBSYS=INIT WEFT_BIN=$BIN batch mpirun "$REPO/docs/slurm/mpirun.sbatch" \
	-b 1K -e 64K -f 4 -n 3 -w 1 &&
	msg=$(check_perf "$OUT/mpirun" 4 PMIx "launcher interface PMIx: rank"); then
	if [ "$(cat "$OUT/mpirun" "$OUT/mpirun.err" | grep -oE 'INFO INIT rank [0-9] of 4 ready on h[1-4]' | sort -u |
		awk '{print $NF}' | sort -u | wc -l)" -eq 4 ]; then
		ok "sbatch docs/slurm/mpirun.sbatch: mpirun across 4 nodes, one exact 4-rank job over PMIx"
		echo docs/slurm/mpirun.sbatch >>"$OUT/sbatch-ok"
	else
		fail "sbatch docs/slurm/mpirun.sbatch: the ranks are not on 4 nodes"
		show "$OUT/mpirun"
		show "$OUT/mpirun.err"
	fi
else
	fail "sbatch docs/slurm/mpirun.sbatch: ${msg:-the job failed}"
	show "$OUT/mpirun.sbatch" 5
	show "$OUT/mpirun"
fi

# (h) the docs' blocks marked "slurm" (tests/docs/blocks.py), each as a user
# would paste it on the cluster: srun runs on the cluster as step() runs it,
# build/ is the cluster's copy of the programs ($BIN), and sbatch may name
# only a script that (e)-(g) above ran to the end (sbatch --wait) and passed.
docs_block() {
	local f=$1 where
	where=$(head -n 1 "$f" | cut -c3-)
	{
		printf 'srun() { timeout -k 5 %q %q run -- srun --chdir=%q "$@"; }\n' \
			"$JOB_TIMEOUT" "$SLURM_SH" "$DIR"
		printf 'sbatch() { grep -qx -- "$1" %q || { echo "sbatch $1: not a script (e)-(g) ran and passed" >&2; return 1; }; }\n' \
			"$OUT/sbatch-ok"
		sed -e '1d' -e "s|build/|$BIN/|g" "$f"
	} >"$f.run"
	touch "$OUT/sbatch-ok"
	if (cd "$REPO" && bash -e -o pipefail "$f.run") >"$f.out" 2>&1; then
		ok "docs: $where, on the cluster"
	else
		fail "docs: $where, on the cluster:"
		show "$f.out" 15
	fi
}
mkdir -p "$OUT/docs"
for f in $(cd "$REPO" && python3 tests/docs/blocks.py write slurm "$OUT/docs"); do
	docs_block "$f"
done

# (i) a task lost: with -K0 Slurm leaves the others running (they shrink
# and finish: DONE), with -K1 it ends the step (none finishes)
# lose LABEL SRUN_ARGS...: shrink_bench on 4 nodes, task 2 killed once warm.
lose() {
	local label=$1 pids=$DIR/$1-pids i
	shift
	mkdir -p "$pids" && rm -f "$pids"/pid.*
	step "$label" "$@" --mpi=pmix -N 4 -n 4 "$BIN/shrink_bench" --seconds 60 --after 200 \
		--dir "$pids" >&2 &
	local spid=$!
	for ((i = 0; i < 300; i++)); do
		[ "$(find "$pids" -name 'pid.[0-9]*' | wc -l)" -eq 4 ] && break
		sleep 0.1
	done
	[ -f "$pids/pid.2" ] && kill -KILL "$(cat "$pids/pid.2")"
	wait "$spid"
	grep -c '^DONE rank=' "$OUT/$label"
}
T_LOSE=$SECONDS
done_k0=$(lose shrink-k0 --no-kill -K0)
if [ "$done_k0" -eq 3 ] && [ "$(grep -c 'RESULT .*new_size=3 ' "$OUT/shrink-k0")" -eq 3 ]; then
	ok "srun --no-kill -K0: task 2 killed, the other 3 shrank and finished"
else
	fail "srun --no-kill -K0: $done_k0 of the 3 survivors finished"
	show "$OUT/shrink-k0"
	show "$OUT/shrink-k0.err"
fi
done_k1=$(lose shrink-k1 -K1)
if [ "$done_k1" -lt 3 ] && grep -q 'Terminat' "$OUT/shrink-k1.err"; then
	ok "srun -K1: task 2 killed, Slurm ended the step ($done_k1 of 3 finished)"
else
	fail "srun -K1: the step went on ($done_k1 of 3 finished): the -K0 check proves nothing"
	show "$OUT/shrink-k1.err"
fi
echo "# (i) took $((SECONDS - T_LOSE))s"

echo "# test time: $((SECONDS - T0))s (fabric and cluster up/down not included)"
if [ "$FAILS" -eq 0 ]; then
	rm -rf -- "$OUT"
	echo "PASS: test_slurm"
	exit 0
fi
echo "# outputs kept in $OUT"
echo "FAIL: test_slurm ($FAILS failed)"
exit 1
