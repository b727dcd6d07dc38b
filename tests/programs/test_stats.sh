#!/bin/bash
# test_stats.sh — WEFT_STATS_FILE and weft-topo --stats, on loopback:
#   (a) a 3-rank sendrecv_perf job over sockets writes one file per rank
#       (%r) every WEFT_STATS_INTERVAL=0.2 s: every line parses and has the
#       members a reader needs, bytes > 0, counters that never go down,
#       sub-flow weights that sum to 1, and a final line per ring neighbour
#       with at least the bytes the job had to send it (each call sends the
#       whole buffer to rank+1);
#   (b) a path without %r gets .RANK, %h is the host name; a paced job's
#       lines carry the pacer (dcqcn, the start rate, alpha, cuts), and its
#       self-description the paced connection's state;
#   (c) weft-topo --stats on (a)'s files names every connection, text and
#       JSON; on hand-written files, the last line per connection wins and
#       the leaf uplinks add up the bytes that cross leaves; the path
#       failover's counters (all 0 in (a), where WEFT_REPATH is off) show
#       in the table;
#   (d) bad input: a missing file, a line that is not JSON, a line without
#       "bytes", no file at all; a bad WEFT_STATS_INTERVAL fails init
#       naming it.
# Exit: 0 pass, 1 fail, 77 skipped (no python3).
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
TOPO=$BUILD/weft-topo
PERF=$BUILD/sendrecv_perf
weft_test_python
for p in "$TOPO" "$PERF"; do
	[ -x "$p" ] || { echo "FAIL: $p not built"; exit 1; }
done

weft_test_scratch stats-test

export WEFT_LLDP=0 WEFT_TIMEOUT=60 WEFT_TRANSPORTS=socket WEFT_SOCKET_IFNAME=lo
unset WEFT_TOPO_FILE WEFT_HOSTID WEFT_PACER WEFT_STATS_FILE WEFT_STATS_INTERVAL

# ---- (a) a 3-rank job's files ----
SIZE=$((2 << 20)) WARM=2 ITERS=40
CALLS=$((WARM + ITERS + 1)) # and one checked call (-c 1)
if WEFT_STATS_FILE="$OUT/a.%r.jsonl" WEFT_STATS_INTERVAL=0.2 \
	"$PERF" -np 3 -b $SIZE -e $SIZE -w $WARM -n $ITERS -c 1 >"$OUT/a.out" 2>"$OUT/a.err"; then
	if msg=$("$PY" - "$OUT" 3 $((CALLS * SIZE)) <<'EOF' 2>&1
import json, sys
out, n, need = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
errs = []
want = ("t", "rank", "peer", "host", "leaf", "peer_leaf", "transport", "bytes", "msgs", "ce",
        "delivered", "rtt_us", "pacer", "rate_MBps", "alpha", "cuts", "subflow_bytes", "weights",
        "failovers", "repaths", "replaced", "probes", "resent", "dups", "dark")
for r in range(n):
    path = "%s/a.%d.jsonl" % (out, r)
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        errs.append(str(e)); continue
    if not lines: errs.append("%s is empty" % path)
    last = {}
    for i, text in enumerate(lines, 1):
        where = "%s:%d" % (path, i)
        try: o = json.loads(text)
        except ValueError as e: errs.append("%s: %s" % (where, e)); continue
        miss = [k for k in want if k not in o]
        if miss: errs.append("%s lacks %s" % (where, miss)); continue
        if o["rank"] != r or o["transport"] != "socket" or o["pacer"] != "off":
            errs.append("%s: rank/transport/pacer %r" % (where, (o["rank"], o["transport"], o["pacer"])))
        if o["bytes"] <= 0 or o["msgs"] <= 0: errs.append("%s: bytes %d msgs %d" % (where, o["bytes"], o["msgs"]))
        paths = [o[k] for k in want[-7:]]
        if paths != [0] * 7:  # WEFT_REPATH=off: nothing is kept, nothing counted
            errs.append("%s: path counters %r on a healthy job" % (where, paths))
        w = o["weights"]
        if w is not None and (len(w) != len(o["subflow_bytes"]) or abs(sum(w) - 1) > 1e-6):
            errs.append("%s: weights %r" % (where, w))
        prev = last.get(o["peer"])
        if prev:
            for k in ("t", "bytes", "msgs", "ce", "delivered"):
                if o[k] < prev[k]: errs.append("%s: %s went down" % (where, k))
            for a, b in zip(prev["subflow_bytes"], o["subflow_bytes"]):
                if b < a: errs.append("%s: a sub-flow's bytes went down" % where)
        last[o["peer"]] = o
    nxt = last.get((r + 1) % n)
    if not nxt:
        errs.append("rank %d: no line for rank %d" % (r, (r + 1) % n))
    elif nxt["bytes"] < need:
        errs.append("rank %d: %d bytes to rank %d, the job sent at least %d" % (r, nxt["bytes"], (r + 1) % n, need))
    elif nxt["weights"] is None or nxt["delivered"] <= 0:
        errs.append("rank %d: no sub-flow weights or deliveries: %r" % (r, nxt))
sys.exit("; ".join(errs[:5]) or None)
EOF
	); then
		ok "3 ranks: every file parses, bytes >= $((CALLS * SIZE)) to the next rank, weights sum to 1"
	else
		fail "3-rank files: $msg"
	fi
else
	fail "sendrecv_perf -np 3 with WEFT_STATS_FILE: $(tail -5 "$OUT/a.err")"
fi

# ---- (b) a path without %r, %h, and a paced job ----
me=$(hostname)
if WEFT_STATS_FILE="$OUT/b-%h" WEFT_PACER=dcqcn WEFT_PACER_START_RATE=200e6 \
	"$PERF" -np 2 -b 1M -e 1M -w 1 -n 5 -c 0 >"$OUT/b.out" 2>"$OUT/b.err"; then
	if msg=$("$PY" - "$OUT/b-$me" <<'EOF' 2>&1
import json, sys
errs = []
for r in (0, 1):
    try: lines = [json.loads(l) for l in open("%s.%d" % (sys.argv[1], r))]
    except (OSError, ValueError) as e: errs.append(str(e)); continue
    o = lines[-1]
    if (o["pacer"], o["rate_MBps"], type(o["alpha"]), type(o["cuts"])) != ("dcqcn", 200.0, float, int):
        errs.append("rank %d's pacer: %r" % (r, [o[k] for k in ("pacer", "rate_MBps", "alpha", "cuts")]))
sys.exit("; ".join(errs) or None)
EOF
	); then
		ok "no %r: .RANK appended, %h the host; a paced connection's line has dcqcn at its rate"
	else
		fail "paced files: $msg ($(ls "$OUT"))"
	fi
else
	fail "paced sendrecv_perf -np 2: $(tail -5 "$OUT/b.err")"
fi

if WEFT_PACER=dcqcn WEFT_PACER_START_RATE=200e6 "$TOPO" -np 2 --format json >"$OUT/desc.json" \
	2>"$OUT/desc.err" && msg=$("$PY" -c '
import json, sys
p = json.load(open(sys.argv[1]))["pacer"]
links = p["state"]["links"] if p.get("state") else []
if p["mode"] != "dcqcn" or len(links) != 1: sys.exit("pacer %r" % p)
l = links[0]
if (l["peer"], l["rate_MBps"], l["limiting"]) != (1, 200.0, True) or not all(k in l for k in ("alpha", "cuts", "marks")):
    sys.exit("link %r" % l)' "$OUT/desc.json" 2>&1); then
	ok "the self-description has the pacer's mode and the paced connection's state"
else
	fail "pacer in the description: ${msg:-$(cat "$OUT/desc.err")}"
fi

# ---- (c) weft-topo --stats ----
if "$TOPO" --stats "$OUT"/a.*.jsonl >"$OUT/c.txt" 2>"$OUT/c.err" &&
	"$TOPO" --stats --format json "$OUT"/a.*.jsonl >"$OUT/c.json" 2>>"$OUT/c.err"; then
	if msg=$("$PY" - "$OUT" <<'EOF' 2>&1
import glob, json, re, sys
out = sys.argv[1]
last = {}
for path in sorted(glob.glob(out + "/a.*.jsonl")):
    for l in open(path):
        o = json.loads(l); last[(o["rank"], o["peer"])] = o
text = open(out + "/c.txt").read()
rows = {}
for l in text.splitlines():
    m = re.match(r"^(\d+) -> (\d+)\s+(\S+)\s+(\d+)\s+(\d+)", l)
    if m: rows[(int(m[1]), int(m[2]))] = (m[3], int(m[4]), int(m[5]))
errs = []
if set(rows) != set(last): errs.append("text rows %s, files %s" % (sorted(rows), sorted(last)))
for k, o in last.items():
    if k in rows and rows[k] != (o["transport"], o["bytes"], o["msgs"]):
        errs.append("row %r: %r, last line %r" % (k, rows[k], o))
if "leaf uplinks: none" not in text: errs.append("no leaf line")
d = json.load(open(out + "/c.json"))
if [(c["rank"], c["peer"]) for c in d["connections"]] != sorted(last): errs.append("JSON connections")
if d["leaf_uplinks"] != []: errs.append("JSON uplinks %r" % d["leaf_uplinks"])
sys.exit("; ".join(errs) or None)
EOF
	); then
		ok "--stats: the table names every connection with its last bytes and messages (text, JSON)"
	else
		fail "--stats: $msg"
		cat "$OUT/c.txt"
	fi
else
	fail "weft-topo --stats: $(cat "$OUT/c.err")"
fi

# Hand-written: ranks 0, 1 under leafA, 2 under leafB; 0 -> 1 twice (the
# second wins), and three connections that cross leaves.
line() { # rank peer leaf peer_leaf bytes ce delivered
	printf '{"t":%s,"rank":%s,"peer":%s,"host":"h","leaf":"%s","peer_leaf":"%s","transport":"socket","bytes":%s,"msgs":1,"ce":%s,"delivered":%s,"rtt_us":10,"pacer":"off","rate_MBps":null,"alpha":null,"cuts":null,"subflow_bytes":[1],"weights":[1.0]}\n' \
		"$1" "$1" "$2" "$3" "$4" "$5" "$6" "$7"
}
{ line 0 1 leafA leafA 10 0 1; line 0 2 leafA leafB 1000 5 100; line 0 1 leafA leafA 77 0 2; } >"$OUT/hw.0"
{ line 1 2 leafA leafB 500 5 100; echo; } >"$OUT/hw.1"
line 2 0 leafB leafA 300 0 50 >"$OUT/hw.2"
if "$TOPO" --stats "$OUT"/hw.* >"$OUT/h.txt" 2>"$OUT/h.err" &&
	grep -qE '^0 -> 1 +socket +77 ' "$OUT/h.txt" &&
	grep -qE '^leafA +1500 +2 +10/200 \(0\.0500\)$' "$OUT/h.txt" &&
	grep -qE '^leafB +300 +1 +0/50 \(0\.0000\)$' "$OUT/h.txt" &&
	"$TOPO" --stats --format json "$OUT"/hw.* >"$OUT/h.json" 2>>"$OUT/h.err" &&
	"$PY" -c 'import json, sys; u = json.load(open(sys.argv[1]))["leaf_uplinks"]; assert [(x["leaf"], x["bytes"], x["ce"]) for x in u] == [("leafA", 1500, 10), ("leafB", 300, 0)], u' \
		"$OUT/h.json" 2>>"$OUT/h.err"; then
	ok "--stats: the last line wins; leaf uplinks sum the bytes and CE marks that cross leaves"
else
	fail "--stats on hand-written files: $(cat "$OUT/h.txt" "$OUT/h.err")"
fi

# The path failover's counters (WEFT_REPATH; a line without them, from an
# older file, shows "-").
{ line 0 1 a a 10 0 1 | sed 's/}$/,"failovers":3,"repaths":1,"replaced":2,"probes":0,"resent":40,"dups":1,"dark":1}/'
  line 1 0 a a 10 0 1; } >"$OUT/paths"
if "$TOPO" --stats "$OUT/paths" >"$OUT/p.txt" 2>"$OUT/p.err" &&
	grep -qE '^0 -> 1 .* 3 \(2 replaced\) \+1 moved, 1 dark ' "$OUT/p.txt" &&
	grep -qE '^1 -> 0 .*  - +  1\.00$' "$OUT/p.txt" && grep -q 'failovers' "$OUT/p.txt"; then
	ok "--stats: a connection's failovers, replacements, moves and dark sub-flows"
else
	fail "--stats with path counters: $(cat "$OUT/p.txt" "$OUT/p.err")"
fi

# ---- (d) bad input ----
# expect_fail RC PATTERN CMD...: CMD exits RC and says PATTERN on stderr.
{ line 0 1 a b 1 0 1; echo 'this is not json'; } >"$OUT/garbage"
{ line 0 1 a b 1 0 1; line 0 2 a b 1 0 1 | sed 's/"bytes":1,//'; } >"$OUT/nobytes"
expect_fail 1 "--stats $OUT/missing: No such file" "$TOPO" --stats "$OUT/hw.0" "$OUT/missing"
expect_fail 1 "$OUT/garbage:2: not JSON" "$TOPO" --stats "$OUT/garbage"
expect_fail 1 "$OUT/nobytes:2: not a Weft stats line: \"bytes\"" "$TOPO" --stats "$OUT/nobytes"
line 0 1 a b 1 0 1 | sed 's/}$/,"failovers":"3"}/' >"$OUT/badfo"
expect_fail 1 "$OUT/badfo:1: not a Weft stats line: \"failovers\"" "$TOPO" --stats "$OUT/badfo"
expect_fail 2 "no files given" "$TOPO" --stats
expect_fail 2 "--format text or json" "$TOPO" --stats --format dot "$OUT/hw.0"
# A rank whose init fails lets its bootstrap root tell the others for
# WEFT_BOOTSTRAP_TIMEOUT before it exits: keep that short.
for v in abc 0 -1; do
	expect_fail 1 "WEFT_STATS_INTERVAL=$v: expected seconds" env WEFT_BOOTSTRAP_TIMEOUT=1 \
		WEFT_STATS_FILE="$OUT/iv" WEFT_STATS_INTERVAL=$v "$TOPO" -np 1
done

weft_test_end test_stats
