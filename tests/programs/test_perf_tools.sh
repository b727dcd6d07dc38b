#!/bin/bash
# test_perf_tools.sh — the measurement tools issue 10's figures come from,
# on tiny sizes (a smoke test of what they print and refuse, not a timing):
#   (a) tcp_limit, by default the mean of back-to-back exchanges and with
#       --best the fastest one, prints one row per size, 4 columns, rates
#       > 0 in the modes it ran and 0 in the one it did not, and the best
#       column the larger of the two;
#   (b) copy_limit and c2c_latency print their rows (a positive rate; a
#       median in ns), copy_limit in each of its modes (--cross, --sum,
#       --sum --in-place, --sum --cross) saying which;
#   (c) perf/ab runs a build against itself with program arguments after
#       "--" (-R) and --in-place, and says so in its header; below 64 KiB
#       it compares the time per call (--metric auto); it stops with a
#       clear message when a run fails (an option the perf program refuses);
#       a --near the probe cannot meet is dropped once, and said;
#   (d) bad input: each tool exits 2 naming the option and the value.
# Exit: 0 pass, 1 fail, 77 skipped (no python3 for perf/ab).
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
weft_test_python
for p in tcp_limit copy_limit c2c_latency allreduce_perf; do
	[ -x "$BUILD/$p" ] || { echo "FAIL: $BUILD/$p not built"; exit 1; }
done

weft_test_scratch perf-tools

export WEFT_LLDP=0 WEFT_TIMEOUT=60 WEFT_SOCKET_IFNAME=lo
unset WEFT_TRANSPORTS WEFT_ALGO WEFT_SOCKET_NSOCKS

# Rows of "size poll threads best" (tcp_limit): $1 the file, $2 the sizes
# expected, $3 which modes ran (poll, threads, both).
check_tcp_rows() {
	"$PY" - "$@" <<'EOF'
import sys
path, sizes, mode = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
rows = [l.split() for l in open(path) if l.strip() and not l.startswith("#")]
got = [int(r[0]) for r in rows]
if got != sizes:
    sys.exit("sizes %r, want %r" % (got, sizes))
for r in rows:
    if len(r) != 4:
        sys.exit("row %r: want 4 columns" % r)
    poll, thr, best = map(float, r[1:])
    if (poll > 0) != (mode != "threads") or (thr > 0) != (mode != "poll"):
        sys.exit("row %r: rates do not match mode %s" % (r, mode))
    if best != max(poll, thr):
        sys.exit("row %r: best is not the larger rate" % r)
EOF
}

# ---- (a) tcp_limit ----
T=$BUILD/tcp_limit
if "$T" -b 64K -e 256K -f 4 -n 3 -w 1 >"$OUT/tl" 2>"$OUT/tl.err" &&
	grep -q "mean of back-to-back exchanges" "$OUT/tl" &&
	msg=$(check_tcp_rows "$OUT/tl" 65536,262144 both 2>&1); then
	ok "tcp_limit: mean rows for 64K and 256K, both modes"
else
	fail "tcp_limit mean: ${msg:-} $(cat "$OUT/tl" "$OUT/tl.err" | head -c 400)"
fi
msg=
if "$T" -b 64K -e 64K -n 3 --best --mode poll >"$OUT/tb" 2>"$OUT/tb.err" &&
	grep -q "the fastest of the exchanges" "$OUT/tb" &&
	msg=$(check_tcp_rows "$OUT/tb" 65536 poll 2>&1); then
	ok "tcp_limit --best --mode poll: one row, threads column 0"
else
	fail "tcp_limit --best: ${msg:-} $(cat "$OUT/tb" "$OUT/tb.err" | head -c 400)"
fi
msg=
if "$T" -b 64K -e 64K -n 2 -w 0 --mode threads --nsocks 3 >"$OUT/tt" 2>"$OUT/tt.err" &&
	grep -q "over 3 loopback" "$OUT/tt" && msg=$(check_tcp_rows "$OUT/tt" 65536 threads 2>&1); then
	ok "tcp_limit --mode threads --nsocks 3 -w 0"
else
	fail "tcp_limit threads: ${msg:-} $(cat "$OUT/tt" "$OUT/tt.err" | head -c 400)"
fi

# ---- (b) copy_limit, c2c_latency ----
if "$BUILD/copy_limit" -np 2 -b 64K -e 64K -n 3 >"$OUT/cl" 2>&1 &&
	awk '!/^#/ && $1 == 65536 && $3 > 0 { found = 1 } END { exit !found }' "$OUT/cl"; then
	ok "copy_limit: a 64K row with a positive rate"
else
	fail "copy_limit: $(head -c 400 "$OUT/cl")"
fi
for mode in "--cross" "--sum" "--sum --in-place" "--sum --cross"; do
	# shellcheck disable=SC2086  # the mode's words
	if "$BUILD/copy_limit" -np 2 -b 64K -e 128K -n 3 $mode >"$OUT/clm" 2>&1 &&
		grep -q "(${mode// /.*})" "$OUT/clm" &&
		awk '!/^#/ && $1 == 131072 && $3 > 0 { found = 1 } END { exit !found }' "$OUT/clm"; then
		ok "copy_limit $mode: says so, a 128K row with a positive rate"
	else
		fail "copy_limit $mode: $(head -c 400 "$OUT/clm")"
	fi
done
if "$BUILD/c2c_latency" -n 1000 -r 2 >"$OUT/cc" 2>&1 &&
	awk '$1 == "median" && $2 > 0 { found = 1 } END { exit !found }' "$OUT/cc"; then
	ok "c2c_latency: a median"
else
	fail "c2c_latency: $(head -c 400 "$OUT/cc")"
fi

# ---- (c) perf/ab ----
if "$REPO/perf/ab" --a "$BUILD" --b "$BUILD" --sizes 64K --transports shm --pairs 1 --in-place \
	-- -R >"$OUT/ab" 2>"$OUT/ab.err" &&
	grep -q "in-place, program arguments: -R" "$OUT/ab" &&
	awk '$1 == "shm" && $2 == 65536 && $3 == "busbw" && $4 > 0 && $5 > 0 { found = 1 }
		END { exit !found }' "$OUT/ab"; then
	ok "perf/ab -- -R --in-place: header and a shm busbw row"
else
	fail "perf/ab: $(cat "$OUT/ab" "$OUT/ab.err" | head -c 400)"
fi
# Below 64 KiB --metric auto compares the time per call (A/B).
if "$REPO/perf/ab" --a "$BUILD" --b "$BUILD" --sizes 8 --transports shm --pairs 1 \
	>"$OUT/ab8" 2>"$OUT/ab8.err" &&
	awk '$1 == "shm" && $2 == 8 && $3 == "time" && $4 > 0 && $5 > 0 { found = 1 }
		END { exit !found }' "$OUT/ab8"; then
	ok "perf/ab at 8 B: a time row"
else
	fail "perf/ab at 8 B: $(cat "$OUT/ab8" "$OUT/ab8.err" | head -c 400)"
fi
if "$REPO/perf/ab" --a "$BUILD" --b "$BUILD" --sizes 64K --transports shm --pairs 1 -- -Q \
	>"$OUT/abq" 2>"$OUT/abq.err"; then
	fail "perf/ab with a refused program option succeeded"
elif grep -q "failed" "$OUT/abq.err" && grep -q "unknown option '-Q'" "$OUT/abq.err"; then
	ok "perf/ab: a failing run stops it, with the program's message"
else
	fail "perf/ab -Q: $(head -c 400 "$OUT/abq.err")"
fi
# A --near the probe cannot meet (1 ns) is dropped once its wait runs out,
# not waited for again per pair: 3 pairs, none thrown away, and said.
if "$REPO/perf/ab" --a "$BUILD" --b "$BUILD" --sizes 8 --transports shm --pairs 3 --iters 2000 \
	--near 1 --near-wait 0 >"$OUT/abn" 2>"$OUT/abn.err" &&
	grep -q "^# --near 1 dropped: the probe still read [0-9]* ns after 0 s" "$OUT/abn" &&
	grep -q "^perf/ab: --near 1 dropped" "$OUT/abn.err" &&
	awk '$1 == "shm" && $2 == 8 && $NF == 0 { found = 1 } END { exit !found }' "$OUT/abn"; then
	ok "perf/ab --near beyond reach: dropped once, said, no pair thrown"
else
	fail "perf/ab --near 1: $(cat "$OUT/abn" "$OUT/abn.err" | head -c 600)"
fi

# ---- (d) bad input ----
expect_fail 2 "-n 'x': expected an integer" "$T" -n x
expect_fail 2 "-n '0': expected an integer from 1" "$T" -n 0
expect_fail 2 "--nsocks '17': expected an integer from 1 to 16" "$T" --nsocks 17
expect_fail 2 "--mode 'bogus': expected poll, threads or both" "$T" --mode bogus
expect_fail 2 "unexpected argument 'extra'" "$T" extra
expect_fail 2 "WEFT_SOCKET_NSOCKS '2x'" env WEFT_SOCKET_NSOCKS=2x "$T"
expect_fail 2 "-n 'x': expected an integer" "$BUILD/copy_limit" -n x
expect_fail 2 "-np '0': expected an integer from 1" "$BUILD/copy_limit" -np 0
expect_fail 2 "unexpected argument 'extra'" "$BUILD/copy_limit" extra
expect_fail 2 "--in-place goes with --sum" "$BUILD/copy_limit" --in-place
expect_fail 2 "usage: copy_limit" "$BUILD/copy_limit" --crossed
expect_fail 2 "usage: c2c_latency" "$BUILD/c2c_latency" -n x
expect_fail 2 "--pairs must be at least 1" "$REPO/perf/ab" --a "$BUILD" --b "$BUILD" --pairs 0

weft_test_end test_perf_tools
