#!/bin/bash
# test_weft_topo.sh — the weft-topo program on this machine, with no fabric:
#   (a) every output of a 3-rank local job: text (its sections), JSON (parsed
#       with python3's json module), DOT (checked by graphviz when present),
#       the rankfile; host mode in text and JSON; --settings in both;
#       --launcher (what a process reads from its launcher: Weft's and
#       Slurm's variables, and a launcher's unusable ones an error);
#   (b) a host name with a quote and a backslash in it (a UTS namespace; as
#       root), which the JSON, text and DOT outputs must carry escaped;
#   (c) the round trip: a job's JSON as WEFT_TOPO_FILE for the next job,
#       which must learn the same leaves and spines from it;
#   (d) bad options exit 2; the program links the shared library and calls
#       nothing but the public API (every weft_* symbol it needs is declared
#       in include/weft.h).
# Exit: 0 pass, 1 fail, 77 skipped (no python3). A check that needs
# something missing (unshare, graphviz) says so and is skipped alone.
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
TOPO=$BUILD/weft-topo
weft_test_python
[ -x "$TOPO" ] || { echo "FAIL: $TOPO not built"; exit 1; }

weft_test_scratch topo-test

# Keep the jobs off any real fabric and quick to fail.
export WEFT_LLDP=0 WEFT_TIMEOUT=30
unset WEFT_TOPO_FILE WEFT_HOSTID WEFT_PLACEMENT

# py CHECK_SCRIPT ARGS...: run a python check; its stderr says what failed.
py() {
	local script=$1
	shift
	"$PY" -c "$script" "$@"
}

# ---- (a) every output of a local job ----
if "$TOPO" -np 3 >"$OUT/text" 2>"$OUT/text.err"; then
	missing=""
	for want in "weft-topo: 3 ranks on 1 host under 1 leaf" "rank  host   hostname" \
		"leaves:" "spines: none known" "ring (placement topo): " "leaf crossings: 0" \
		"host leaders: 0" "double binary tree 0" "transports (pairs of ranks" \
		"numa          6 pairs: shm 6" "algorithms (tuner's choice" "allreduce  " "pacer: off"; do
		grep -qF -- "$want" "$OUT/text" || missing="$missing [$want]"
	done
	if [ -z "$missing" ]; then ok "text has every section"; else fail "text lacks$missing"; fi
else
	fail "weft-topo -np 3: $(cat "$OUT/text.err")"
fi

if "$TOPO" -np 3 --format json >"$OUT/job.json" 2>"$OUT/json.err"; then
	if msg=$(py '
import json, sys
d = json.load(open(sys.argv[1]))
errs = []
for k in ("version", "nranks", "ranks", "hosts", "leaves", "spines", "ring", "trees",
          "transports", "tuner", "pacer"):
    if k not in d: errs.append("no " + k)
if d.get("nranks") != 3 or [r["rank"] for r in d["ranks"]] != [0, 1, 2]: errs.append("ranks")
if sorted(d["ring"]["order"]) != [0, 1, 2]: errs.append("ring order")
pairs = sum(t["pairs"] for t in d["transports"])
if pairs != 9: errs.append("transports cover %d pairs, not 9" % pairs)
if d["pacer"]["mode"] != "off": errs.append("pacer")
sys.exit("; ".join(errs) or None)' "$OUT/job.json" 2>&1); then
		ok "JSON parses and has every member"
	else
		fail "JSON: $msg"
	fi
else
	fail "weft-topo -np 3 --format json: $(cat "$OUT/json.err")"
fi

if "$TOPO" -np 3 --format dot >"$OUT/job.dot" 2>"$OUT/dot.err" &&
	grep -q '^digraph weft {' "$OUT/job.dot" && grep -q 'r2 -> r0' "$OUT/job.dot"; then
	if command -v dot >/dev/null 2>&1; then
		if dot -Tsvg "$OUT/job.dot" >/dev/null 2>"$OUT/dot.check"; then
			ok "DOT renders"
		else
			fail "DOT: $(cat "$OUT/dot.check")"
		fi
	else
		ok "DOT written (graphviz not here: not rendered)"
	fi
else
	fail "weft-topo --format dot: $(cat "$OUT/dot.err")"
fi

if "$TOPO" -np 3 --rankfile >"$OUT/rankfile" 2>&1 &&
	[ "$(grep -cE '^rank [0-2]=.+ slot=[0-2]$' "$OUT/rankfile")" -eq 3 ]; then
	ok "rankfile has 3 ranks"
else
	fail "rankfile: $(head -5 "$OUT/rankfile")"
fi

if "$TOPO" >"$OUT/host" 2>&1 && grep -q '^host .* (id ' "$OUT/host" &&
	grep -q '^  interfaces:' "$OUT/host" && "$TOPO" --format json >"$OUT/host.json" 2>"$OUT/host.err" &&
	py 'import json, sys; d = json.load(open(sys.argv[1])); assert d["interfaces"] and "cores" in d' \
		"$OUT/host.json"; then
	ok "host mode, text and JSON"
else
	fail "host mode: $(head -5 "$OUT/host" "$OUT/host.err")"
fi

if "$TOPO" --settings >"$OUT/settings" && grep -q '^WEFT_TOPO_FILE  *- ' "$OUT/settings" &&
	"$TOPO" --settings --format json >"$OUT/settings.json" &&
	py 'import json, sys; d = json.load(open(sys.argv[1])); assert any(s["name"] == "WEFT_TIMEOUT" and s["default"] == "300" for s in d["settings"])' \
		"$OUT/settings.json"; then
	ok "--settings, text and JSON"
else
	fail "--settings: $(head -3 "$OUT/settings")"
fi

# --launcher: the launcher's word as each process reads it, no job started.
# env -i: only the variables given (a launcher's own must not leak in).
launcher_line() { env -i PATH="$PATH" WEFT_PMIX=0 "$@" "$TOPO" --launcher 2>"$OUT/launcher.err"; }
host=$(hostname)
got1=$(launcher_line WEFT_RANK=2 WEFT_NRANKS=3 WEFT_LOCAL_RANK=0 WEFT_LOCAL_SIZE=1)
got2=$(launcher_line SLURM_PROCID=5 SLURM_NTASKS=7 SLURM_LOCALID=1 SLURM_NODEID=2 \
	SLURM_STEP_TASKS_PER_NODE='2(x3),1' SLURM_STEP_NUM_NODES=4 SLURM_STEP_ID=0 \
	SLURM_JOB_ID=9 SLURM_STEP_NODELIST='n[1-4]')
if [ "$got1" = "launcher weft host $host rank 2 nranks 3 local_rank 0 local_size 1" ] &&
	[ "$got2" = "launcher Slurm host $host rank 5 nranks 7 local_rank 1 local_size 2" ]; then
	ok "--launcher: Weft's variables, and Slurm's with SLURM_STEP_TASKS_PER_NODE=2(x3),1"
else
	fail "--launcher: '$got1' / '$got2' $(cat "$OUT/launcher.err")"
fi
if launcher_line SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_JOB_ID=3 >/dev/null; then
	fail "--launcher: an sbatch script's SLURM_PROCID without SLURM_STEP_ID was accepted"
elif grep -q "weft-topo: $host: SLURM_PROCID is set but SLURM_STEP_ID is not" "$OUT/launcher.err"; then
	ok "--launcher: unusable Slurm variables fail, naming what is missing"
else
	fail "--launcher: no message naming SLURM_STEP_ID: $(cat "$OUT/launcher.err")"
fi

# ---- (b) a host name that needs escaping ----
QNAME='we"ft\x'
if [ "$(id -u)" -ne 0 ]; then
	echo "skip: a quoted host name needs root for a UTS namespace"
elif ! unshare -u true 2>/dev/null; then
	echo "skip: unshare -u is not allowed here"
else
	# hostname(1) refuses the name; the kernel takes it.
	setname="printf '%s' \"\$QNAME\" > /proc/sys/kernel/hostname"
	if QNAME=$QNAME TOPO=$TOPO unshare -u sh -c "$setname && \"\$TOPO\" --format json" \
		>"$OUT/q-host.json" 2>"$OUT/q.err" &&
		QNAME=$QNAME TOPO=$TOPO unshare -u sh -c "$setname && \"\$TOPO\" -np 2 --format json" \
			>"$OUT/q-job.json" 2>>"$OUT/q.err" &&
		QNAME=$QNAME TOPO=$TOPO unshare -u sh -c "$setname && \"\$TOPO\" -np 2 --format dot" \
			>"$OUT/q-job.dot" 2>>"$OUT/q.err"; then
		if msg=$(py '
import json, sys
name = sys.argv[3]
h = json.load(open(sys.argv[1])); j = json.load(open(sys.argv[2]))
errs = []
if h["hostname"] != name: errs.append("host mode hostname %r" % h["hostname"])
if not h["host"].startswith(name + "/"): errs.append("host mode host id %r" % h["host"])
for r in j["ranks"]:
    if r["hostname"] != name: errs.append("rank %d hostname %r" % (r["rank"], r["hostname"]))
if j["leaves"][0]["name"] != "host:" + name: errs.append("leaf %r" % j["leaves"][0]["name"])
sys.exit("; ".join(errs) or None)' "$OUT/q-host.json" "$OUT/q-job.json" "$QNAME" 2>&1) &&
			grep -qF 'label="host 0: we\"ft\\x";' "$OUT/q-job.dot"; then
			ok "a host name with a quote and a backslash comes out escaped (JSON, DOT)"
		else
			fail "quoted host name: ${msg:-DOT label not escaped}"
			head -c 600 "$OUT/q-job.json"
		fi
	else
		fail "weft-topo in a UTS namespace: $(head -c 400 "$OUT/q.err")"
	fi
fi

# ---- (c) round trip: a job's JSON as the next job's WEFT_TOPO_FILE ----
me=$(hostname)
printf 'SwitchName=leafA Nodes=%s\nSwitchName=spineB Switches=leafA\n' "$me" >"$OUT/topo.conf"
if WEFT_TOPO_FILE=$OUT/topo.conf "$TOPO" -np 3 --format json >"$OUT/rt1.json" 2>"$OUT/rt.err" &&
	WEFT_TOPO_FILE=$OUT/rt1.json "$TOPO" -np 3 --format json >"$OUT/rt2.json" 2>>"$OUT/rt.err"; then
	if msg=$(py '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda d: [(r["hostname"], r["leaf"], r["leaf_source"], r["spine"]) for r in d["ranks"]]
errs = []
for r in a["ranks"]:
    if (r["leaf"], r["leaf_source"], r["spine"]) != ("leafA", "file", "spineB"):
        errs.append("first job rank %d: %r" % (r["rank"], (r["leaf"], r["leaf_source"], r["spine"])))
if key(a) != key(b): errs.append("second job learned %r, first %r" % (key(b), key(a)))
if [s["name"] for s in b["spines"]] != ["spineB"]: errs.append("spines %r" % b["spines"])
sys.exit("; ".join(errs) or None)' "$OUT/rt1.json" "$OUT/rt2.json" 2>&1); then
		ok "round trip: the JSON read back as WEFT_TOPO_FILE gives the same leaves"
	else
		fail "round trip: $msg"
	fi
else
	fail "round trip jobs: $(head -c 400 "$OUT/rt.err")"
fi

# ---- (d) options and linkage ----
for args in "--format xml" "--format dot"; do
	# shellcheck disable=SC2086  # two words on purpose
	"$TOPO" $args >/dev/null 2>&1
	rc=$?
	if [ $rc -eq 2 ]; then ok "weft-topo $args (no job) exits 2"; else fail "weft-topo $args exits $rc"; fi
done
# Not "ldd | grep -q": grep leaves early and pipefail sees ldd's SIGPIPE.
if ldd "$TOPO" | grep -c 'libweft\.so' >/dev/null; then
	internal=""
	for sym in $(nm -u "$TOPO" | awk '$1 == "U" && $2 ~ /^weft_/ {sub(/@.*/, "", $2); print $2}'); do
		grep -qE "\\b$sym\\(" "$REPO/include/weft.h" || internal="$internal $sym"
	done
	if [ -z "$internal" ]; then
		ok "weft-topo links libweft.so and uses only the public API"
	else
		fail "weft-topo calls internals:$internal"
	fi
else
	fail "weft-topo does not link libweft.so"
fi

weft_test_end test_weft_topo
