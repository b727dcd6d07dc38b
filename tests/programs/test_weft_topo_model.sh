#!/bin/bash
# test_weft_topo_model.sh — weft-topo --model on generated fat trees
# (tools/gen_topology), no job started:
#   (a) known answers on a small tree (2 spines x 2 leaves x 3 hosts, 4 ranks
#       per host): counts, ring leaf and spine crossings for the placement
#       and for plain rank order under block, round-robin and random orders,
#       tree depths, pairs per link class; the ring's flow estimate on one
#       leaf, by hand;
#   (b) invariants on trees of 16 to 4,096 hosts: every rank once in the
#       ring; the ring crosses leaves once per leaf used and spines once per
#       spine used; rank-order crossings and pair counts recomputed here
#       from "ranks" agree with the library's; trees no deeper than
#       ceil(log2 n) + 3 levels; one leader per host and per leaf; the
#       tuner's choices the same under every rank order; the tuner's table
#       has 8 B, 64 KiB, 4 MiB and 256 MiB; the flow table ("tuner"."flow")
#       at those sizes, its alpha-beta figures and choice the tuner's, every
#       flow estimate at least its latency part, hier-leaf present exactly
#       when there are several leaves, its choices the same under every
#       order too;
#   (c) a rankfile round trip: --rankfile of a round-robin model, read back
#       as --order, puts consecutive ranks on consecutive ring positions
#       (rank order then crosses leaves as often as the placement);
#   (d) bad files, orders and options: a clear message and a non-zero exit.
# Exit: 0 pass, 1 fail, 77 skipped (no python3). WEFT_BUILD: build dir.

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
TOPO=$BUILD/weft-topo
GEN=$REPO/tools/gen_topology
weft_test_python
[ -x "$TOPO" ] || { echo "FAIL: $TOPO not built"; exit 1; }

weft_test_scratch topo-model
unset WEFT_PLACEMENT WEFT_ALGO WEFT_TUNE WEFT_TUNE_CALIBRATE WEFT_TOPO_FILE

# model NAME ARGS...: weft-topo --model ARGS --format json into $OUT/NAME.json
model() {
	local name=$1
	shift
	"$TOPO" --model "$@" --format json >"$OUT/$name.json" 2>"$OUT/$name.err" ||
		{ fail "--model $*: exit $? ($(cat "$OUT/$name.err"))"; return 1; }
}

# The invariants of (b), on one document; argv: file [expected nranks].
CHECK='
import json, math, sys
d = json.load(open(sys.argv[1]))
n, ranks, ring = d["nranks"], d["ranks"], d["ring"]
if len(sys.argv) > 2:
    assert n == int(sys.argv[2]), f"nranks {n}, expected {sys.argv[2]}"
order = ring["order"]
assert sorted(order) == list(range(n)), "the ring is not every rank once"
leaf = [r["leaf_index"] for r in ranks]
leaves_used, spines_used = len(set(leaf)), len(d["spines"])
def cross(seq, key):
    return sum(key[seq[i]] != key[seq[(i + 1) % len(seq)]] for i in range(len(seq)))
want = leaves_used if leaves_used > 1 else 0
assert ring["leaf_crossings"] == want, "leaf crossings %d, leaves %d" % (ring["leaf_crossings"], want)
spine_of_leaf = {l["index"]: l["spine_index"] for l in d["leaves"]}
spine = [spine_of_leaf[x] for x in leaf]
want = spines_used if spines_used > 1 else 0
assert ring["spine_crossings"] == want, "spine crossings %d, spines %d" % (ring["spine_crossings"], want)
plain = list(range(n))
assert ring["rank_order"]["leaf_crossings"] == cross(plain, leaf), "rank-order leaf crossings"
assert ring["rank_order"]["spine_crossings"] == cross(plain, spine), "rank-order spine crossings"
assert cross(order, leaf) == ring["leaf_crossings"], "ring crossings recomputed"
bound = math.ceil(math.log2(n)) + 3 if n > 1 else 0
t = d["trees"]
for tree in t["double_binary"] + [t["binary"]]:
    assert tree["depth"] <= bound, "tree depth %d > %d" % (tree["depth"], bound)
assert len(t["host_leaders"]) == d["nhosts"] and len(t["leaf_leaders"]) == d["nleaves"]
host = [r["host_index"] for r in ranks]
per_host, per_leaf = {}, {}
for h, l in zip(host, leaf):
    per_host[h] = per_host.get(h, 0) + 1
    per_leaf[l] = per_leaf.get(l, 0) + 1
pairs = {c["link"]: c["pairs"] for c in d["transports"]}
same_host = sum(k * (k - 1) for k in per_host.values())
same_leaf = sum(k * (k - 1) for k in per_leaf.values())
assert pairs.get("self") == n
assert pairs.get("host", 0) == same_host, "host pairs %s != %d" % (pairs.get("host"), same_host)
assert pairs.get("leaf", 0) == same_leaf - same_host, "leaf pairs"
assert pairs.get("spine", 0) == n * (n - 1) - same_leaf, "spine pairs"
assert sum(pairs.values()) == n * n
ar = next(c for c in d["tuner"]["collectives"] if c["name"] == "allreduce")
table = {s["bytes"]: s for s in ar["sizes"]}
flow = d["tuner"]["flow"]
sizes = [8, 65536, 4194304, 268435456]
assert all(b in table for b in sizes), "tuner table sizes %s" % sorted(table)
assert [s["bytes"] for s in flow["sizes"]] == sizes, "flow sizes"
assert [v["name"] for v in flow["estimate_only"]] == ["hier-leaf"]
algos = flow["algorithms"]
assert algos == ["ring", "tree", "rhd", "hier", "rail"], algos
for row in flow["sizes"]:
    t = table[row["bytes"]]
    assert row["ab_choice"] == t["choice"], "a-b choice %s, tuner %s" % (row["ab_choice"], t["choice"])
    assert row["flow_choice"] in algos and row["agree"] == (row["ab_choice"] == row["flow_choice"])
    for a in algos:
        want = t["estimates_us"][a]
        assert (row["ab_us"][a] is None) == (want is None), a
        assert want is None or abs(row["ab_us"][a] - want) <= 1e-6 * want, a
    for a in algos + ["hier-leaf"]:
        ab, fl, lat = row["ab_us"][a], row["flow_us"][a], row["latency_us"][a]
        assert (fl is None) == (ab is None), a
        if fl is None:
            continue
        assert 0 <= lat <= fl and lat <= ab * (1 + 1e-9), "%s: latency %s flow %s a-b %s" % (a, lat, fl, ab)
        link = row["busiest"][a]
        assert (link is None) == (d["nhosts"] == 1), a
        if link is not None:
            assert link["link"] in ("host-up", "host-down", "leaf-up", "leaf-down") and link["bytes"] > 0
    leafy = d["nleaves"] > 1 and n > d["nleaves"]
    assert (row["flow_us"]["hier-leaf"] is not None) == leafy, "hier-leaf"
widest = max(__import__("collections").Counter(l for h, l in set(zip(host, leaf))).values())
bw = flow["bandwidth_Bps"]
assert abs(bw["leaf_uplinks"] - widest * bw["leaf_uplink_per_host"]) <= 1e-6 * bw["leaf_uplinks"], "leaf uplinks"
big, small = flow["sizes"][-1], flow["sizes"][0]
for a in algos:
    assert big["flow_us"][a] is None or big["flow_us"][a] >= small["flow_us"][a], a
'

# The tuner's choices, one line per (collective, size).
CHOICES='
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["tuner"]["collectives"]:
    for s in c["sizes"]:
        print(c["name"], s["bytes"], s["choice"])
for s in d["tuner"]["flow"]["sizes"]:
    print("flow", s["bytes"], s["ab_choice"], s["flow_choice"])
'

# ---- (a) known answers ----
"$GEN" 2 2 3 >"$OUT/small.conf"
# field PATH-in-python: print one value of a document
field() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$OUT/$1.json"; }
expect() { # name expression want what
	local got
	got=$(field "$1" "$2") || { fail "$4: cannot read $1.json"; return; }
	[ "$got" = "$3" ] && ok "$4: $got" || fail "$4: got '$got', want '$3'"
}
if model block "$OUT/small.conf" --ranks-per-host 4; then
	expect block 'd["nranks"], d["nhosts"], d["nleaves"], d["nspines"]' "48 12 4 2" \
		"block: ranks, hosts, leaves, spines"
	expect block 'd["ring"]["leaf_crossings"], d["ring"]["spine_crossings"]' "4 2" \
		"block: ring crossings (leaves, spines)"
	expect block 'd["ring"]["rank_order"]["leaf_crossings"], d["ring"]["rank_order"]["spine_crossings"]' \
		"4 2" "block: rank order crossings"
	# 48 ranks: ceil(log2 48) = 6
	expect block '[t["depth"] for t in d["trees"]["double_binary"]], d["trees"]["binary"]["depth"]' \
		"[6, 6] 6" "block: tree depths"
	expect block '{c["link"]: c["pairs"] for c in d["transports"]}' \
		"{'self': 48, 'host': 144, 'leaf': 384, 'spine': 1728}" "block: pairs per link class"
	expect block 'd["trees"]["leaf_leaders"]' "[0, 12, 24, 36]" "block: leaf leaders"
	expect block '[s["name"] for s in d["model"]["steps"]][:5]' \
		"['load', 'ranks', 'graph', 'placement', 'tuner init']" "block: model steps"
fi
# One leaf of 4 hosts, 2 ranks each: the ring leaves every host once, and
# each of its edges carries 2 (n-1)/n x 256 MiB = 469,762,048 bytes, over a
# 3 GB/s host uplink 156,587.35 us; plus its 2 (n-1) = 14 latencies of 10 us
# (the leaf class): 156,727.35 us. No hier-leaf with one leaf.
"$GEN" 1 1 4 >"$OUT/oneleaf.conf"
if model oneleaf "$OUT/oneleaf.conf" --ranks-per-host 2; then
	row='[r for r in d["tuner"]["flow"]["sizes"] if r["bytes"] == 268435456][0]'
	expect oneleaf "$row[\"busiest\"][\"ring\"][\"link\"], round($row[\"busiest\"][\"ring\"][\"bytes\"])" \
		"host-up 469762048" "one leaf: ring's busiest link and its bytes at 256 MiB"
	expect oneleaf "abs($row[\"flow_us\"][\"ring\"] - 156727.35) < 0.01" "True" \
		"one leaf: ring's flow estimate at 256 MiB (156727.35 us)"
	expect oneleaf "$row[\"flow_us\"][\"hier-leaf\"], $row[\"ab_us\"][\"hier-leaf\"]" "None None" \
		"one leaf: no hier-leaf"
fi
# Four leaves of 3 hosts (small.conf), 4 ranks each: the placement ring
# leaves each leaf once, so a leaf's uplinks (3 hosts x 1 GB/s) carry one
# ring edge, as much as a host's uplink: the host uplink, found first, decides.
if [ -s "$OUT/block.json" ]; then
	row='[r for r in d["tuner"]["flow"]["sizes"] if r["bytes"] == 268435456][0]'
	expect block "$row[\"busiest\"][\"ring\"][\"link\"], round($row[\"busiest\"][\"ring\"][\"bytes\"])" \
		"host-up 525686101" "block: ring's busiest link and its bytes at 256 MiB (2 x 47/48 x 256 MiB)"
	expect block "$row[\"flow_us\"][\"hier-leaf\"] is not None" "True" "block: hier-leaf estimated"
fi

# The training fabric (perf/bench_training.sh: 2 leaves of 2 hosts), R ranks
# per host interleaved: with several ranks per host the tuner takes the rail
# AllReduce (every local rank carries its slice among the hosts) from 64 KiB
# up; with one, recursive halving-doubling among the hosts.
"$GEN" 1 2 2 >"$OUT/train.conf"
ar_choices='" ".join(s["choice"] for c in d["tuner"]["collectives"] if c["name"] == "allreduce"
	for s in c["sizes"] if s["bytes"] >= 65536)'
for per in 1 2 4; do
	want="rail rail rail rail rail"
	[ "$per" -gt 1 ] || want="rhd rhd rhd rhd rhd"
	model "train$per" "$OUT/train.conf" --ranks-per-host "$per" --order round-robin &&
		expect "train$per" "$ar_choices" "$want" \
			"training fabric, $per per host: AllReduce from 64 KiB to 256 MiB"
done

# A partly filled last leaf (3 hosts, then 1) has the uplinks of the
# widest: 3 x 1 GB/s.
"$GEN" 1 2 3 --max-hosts 4 >"$OUT/uneven.conf"
if model uneven "$OUT/uneven.conf" --ranks-per-host 1; then
	expect uneven 'round(d["tuner"]["flow"]["bandwidth_Bps"]["leaf_uplinks"])' "3000000000" \
		"uneven leaves: a leaf's uplinks as the widest leaf's"
fi

# round-robin: rank r on host r % 12, so rank order leaves a leaf after
# hosts 2, 5, 8 and 11 (4 of every 12 steps, 16 in all) and a spine after
# hosts 5 and 11 (8); the placement still crosses once per leaf, per spine.
if model rr "$OUT/small.conf" --ranks-per-host 4 --order round-robin; then
	expect rr 'd["ring"]["leaf_crossings"], d["ring"]["spine_crossings"]' "4 2" \
		"round-robin: ring crossings"
	expect rr 'd["ring"]["rank_order"]["leaf_crossings"], d["ring"]["rank_order"]["spine_crossings"]' \
		"16 8" "round-robin: rank order crossings"
	expect rr 'd["trees"]["host_leaders"][:4]' "[0, 1, 2, 3]" "round-robin: host leaders"
fi
if model rand7 "$OUT/small.conf" --ranks-per-host 4 --order random:7 &&
	model rand7b "$OUT/small.conf" --ranks-per-host 4 --order random:7 &&
	model rand8 "$OUT/small.conf" --ranks-per-host 4 --order random:8; then
	a=$(field rand7 '[r["host_index"] for r in d["ranks"]]')
	b=$(field rand7b '[r["host_index"] for r in d["ranks"]]')
	c=$(field rand8 '[r["host_index"] for r in d["ranks"]]')
	[ "$a" = "$b" ] && ok "random:7 twice: the same order" || fail "random:7 differs between runs"
	[ "$a" != "$c" ] && ok "random:7 and random:8 differ" || fail "random:7 and random:8 agree"
	expect rand7 'd["ring"]["leaf_crossings"]' "4" "random:7: ring leaf crossings"
	expect rand7 'sorted(__import__("collections").Counter(r["host_index"] for r in d["ranks"]).values())' \
		"[4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]" "random:7: 4 ranks on every host"
fi

# text: a summary from the brief document (WEFT_MODEL_BRIEF), the same figures
if "$TOPO" --model "$OUT/small.conf" --ranks-per-host 4 --order round-robin >"$OUT/rr.txt" 2>&1; then
	missing=""
	for want in "48 ranks on 12 hosts under 4 leaves, 2 spines" \
		"order: 48 (0 -> 12 -> 24 -> 36 -> 1 -> 13 -> 25 -> 37 -> ...)" \
		"leaf crossings: 4 (plain rank order: 16)" "spine crossings: 2 (plain rank order: 8)" \
		"host leaders: 12 (0 1 2 3 4 5 6 7 ...)" "leaf leaders: 4 (0 3 6 9)" \
		"spine      1728 pairs: net 1728" "model steps:" "tuner init" "weft-topo" \
		"allreduce, alpha-beta against flow (us)" "hier-leaf*" "busiest link" \
		"* hier-leaf: estimate only"; do
		grep -qF -- "$want" "$OUT/rr.txt" || missing="$missing [$want]"
	done
	[ -z "$missing" ] && ok "text summary" || fail "text summary lacks$missing"
else
	fail "text: $(cat "$OUT/rr.txt")"
fi
expect rr '"brief" in d, len(d["ranks"]), len(d["ring"]["order"])' "False 48 48" \
	"json: whole lists, not brief"

# ---- (b) invariants from 16 to 4,096 hosts ----
for shape in "1 2 8:1" "2 4 8:3" "2 4 32:2" "4 8 32:1" "4 32 32:2"; do
	set -- ${shape%%:*}
	per=${shape##*:}
	hosts=$(($1 * $2 * $3))
	"$GEN" $1 $2 $3 >"$OUT/t.conf"
	for order in block round-robin random:3; do
		model inv "$OUT/t.conf" --ranks-per-host "$per" --order "$order" || continue
		if "$PY" -c "$CHECK" "$OUT/inv.json" $((hosts * per)) 2>"$OUT/check.err"; then
			ok "$hosts hosts x $per ($order): invariants"
		else
			fail "$hosts hosts x $per ($order): $(tail -1 "$OUT/check.err")"
		fi
		"$PY" -c "$CHOICES" "$OUT/inv.json" >"$OUT/choices.$order"
	done
	cmp -s "$OUT/choices.block" "$OUT/choices.round-robin" &&
		cmp -s "$OUT/choices.block" "$OUT/choices.random:3" &&
		ok "$hosts hosts x $per: tuner choices the same under every order" ||
		fail "$hosts hosts x $per: tuner choices depend on the rank order"
done

# ---- (c) rankfile round trip ----
if "$TOPO" --model "$OUT/small.conf" --ranks-per-host 4 --order round-robin --rankfile \
	>"$OUT/rankfile" 2>"$OUT/rankfile.err" && model back "$OUT/small.conf" --order "$OUT/rankfile"; then
	expect back 'd["nranks"], d["ring"]["rank_order"]["leaf_crossings"], d["ring"]["leaf_crossings"]' \
		"48 4 4" "rankfile round trip: rank order crosses as the placement"
else
	fail "rankfile round trip: $(cat "$OUT/rankfile.err" "$OUT/back.err" 2>/dev/null)"
fi

# ---- (d) bad input ----
# bad NAME WANT ARGS...: weft-topo ARGS must fail with WANT in its stderr
bad() {
	local name=$1 want=$2 rc
	shift 2
	"$TOPO" "$@" >/dev/null 2>"$OUT/bad.err"
	rc=$?
	if [ $rc -ne 0 ] && grep -qF -- "$want" "$OUT/bad.err"; then
		ok "$name: exit $rc, '$want'"
	else
		fail "$name: exit $rc, stderr: $(cat "$OUT/bad.err")"
	fi
}
printf 'SwitchName=leaf0 Nodes=h[0-3]\nSwitchName=spine0 Switches=leafX\n' >"$OUT/badsw.conf"
printf 'SwitchName=leaf0 Nodes=h[0-3]\nSwitchName=leaf1 Nods=h[4-7]\n' >"$OUT/badkey.conf"
printf 'rank 0=h00\nrank 2=h01\n' >"$OUT/gap.rf"
printf 'rank 0=h00\nrank 0=h01\n' >"$OUT/twice.rf"
printf 'rank 0=nosuchhost\n' >"$OUT/stranger.rf"
printf 'this is not a rankfile\n' >"$OUT/junk.rf"
bad "missing file" "$OUT/nope.conf" --model "$OUT/nope.conf"
bad "undefined switch" "badsw.conf:2" --model "$OUT/badsw.conf"
bad "unknown key" "badkey.conf:2" --model "$OUT/badkey.conf"
bad "bad order" "--order sideways" --model "$OUT/small.conf" --order sideways
bad "bad seed" "random:SEED" --model "$OUT/small.conf" --order random:x
bad "rankfile gap" "rank 1 is missing" --model "$OUT/small.conf" --order "$OUT/gap.rf"
bad "rankfile twice" "rank given twice" --model "$OUT/small.conf" --order "$OUT/twice.rf"
bad "rankfile host" "does not name: nosuchhost" --model "$OUT/small.conf" --order "$OUT/stranger.rf"
bad "rankfile junk" "junk.rf:1" --model "$OUT/small.conf" --order "$OUT/junk.rf"
bad "zero per host" "--ranks-per-host 0" --model "$OUT/small.conf" --ranks-per-host 0
bad "too many ranks" "more than 1000000 ranks" --model "$OUT/small.conf" --ranks-per-host 100000
bad "order without model" "need --model" --order block
bad "model and -np" "a model runs no job" --model "$OUT/small.conf" -np 2
WEFT_TUNE_CALIBRATE=1 bad "calibrate" "WEFT_TUNE_CALIBRATE=1" --model "$OUT/small.conf"
WEFT_PLACEMENT=sideways bad "placement" "WEFT_PLACEMENT=sideways" --model "$OUT/small.conf"

[ $FAILS -eq 0 ] && echo "test_weft_topo_model: all passed" && exit 0
echo "test_weft_topo_model: $FAILS failed"
exit 1
