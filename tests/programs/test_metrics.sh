#!/bin/bash
# test_metrics.sh — metrics in Prometheus's formats (health/metrics.h), on
# loopback:
#   (a) 3 Python ranks over sockets, WEFT_METRICS_PORT and WEFT_METRICS_FILE
#       (%r, every 0.2 s), do 20 allreduces of 1 MiB and 5 alltoalls, then
#       wait: each endpoint answers GET /metrics in the text format 0.0.4
#       (promtool check metrics accepts it) and OpenMetrics when asked for
#       it (its Content-Type, ending "# EOF"), 404 elsewhere and 405 to a
#       POST; the counts are the job's (20 allreduces, 20 MiB of them, 5
#       alltoalls), every series carries weft_job, rank, host, leaf and comm, and
#       a rank's scrape has a bounded number of series; the files say the
#       same, promtool accepts them, and the last one written at exit has
#       the final counts; weft-topo --watch --once shows the three ranks and
#       their links;
#   (b) WEFT_METRICS_PEERS=1: traffic to 2 peers is summed per peer leaf
#       (weft_leaf_*, weft_metrics_peers_aggregated 2, no weft_peer_*);
#   (c) node_exporter's textfile collector (Debian's
#       prometheus-node-exporter, on 127.0.0.1) reads the files: Weft's
#       series with their values, and no textfile scrape error;
#   (d) without libmicrohttpd (WEFT_MHD_LIB naming a missing library) the
#       job runs and warns that it serves no endpoint; libweft does not
#       link libmicrohttpd; a port already taken: a warning, the job runs;
#   (e) bad settings fail init naming them;
#   (f) docs/observability-alerts.yml passes promtool check rules;
#   (g) the live view under tmux (send-keys, capture-pane): one rank paced
#       at 8 MB/s (WEFT_PACER_START_RATE), the frame shows the ranks and
#       their links with that rank's connections marked slowest, and q
#       quits.
# Exit: 0 pass, 1 fail, 77 skipped (no python3 with numpy, no curl).
# WEFT_BUILD: the build directory (default build).

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
weft_test_python
TOPO=$BUILD/weft-topo
[ -x "$TOPO" ] || { echo "FAIL: $TOPO not built"; exit 1; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY has no numpy"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
weft_test_scratch metrics-test

cat >"$OUT/job.py" <<'EOF'
import os, sys, time
import numpy as np
import weft

comm = weft.Comm.from_env()
x = np.ones(1 << 18, dtype=np.float32)  # 1 MiB
for i in range(20):
    comm.allreduce(x)
    x[:] = 1
y = np.ones(3 * 1024, dtype=np.float32)
for i in range(5):
    comm.alltoall(y)
print("READY", flush=True)
done = sys.argv[1]
for i in range(600):
    if os.path.exists(done):
        break
    time.sleep(0.1)
comm.barrier()
EOF

SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
BASE=$((20000 + ($$ * 7) % 12000)) # below the ephemeral ports (32768-): no connection holds them
# free_port: a port nobody listens on now, from the kernel (a port drawn
# at random collided with other jobs' connections on a busy machine)
free_port() {
	"$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# job LABEL NRANKS [VAR=VALUE...]: start the ranks (PIDS), wait for READY.
job() {
	local label=$1 n=$2 r port
	port=$(free_port)
	shift 2
	PIDS=()
	rm -f "$OUT/$label.done"
	for ((r = 0; r < n; r++)); do
		env WEFT_RANK=$r WEFT_NRANKS="$n" WEFT_ROOT=127.0.0.1:$port WEFT_SECRET="$SECRET" \
			WEFT_TRANSPORTS=socket WEFT_SOCKET_IFNAME=lo WEFT_LLDP=0 WEFT_TIMEOUT=60 \
			WEFT_BUILD="$BUILD" PYTHONPATH="$REPO/python" "$@" \
			"$PY" "$OUT/job.py" "$OUT/$label.done" >"$OUT/$label.$r.out" 2>"$OUT/$label.$r.err" &
		PIDS+=($!)
	done
	for ((i = 0; i < 600; i++)); do
		[ "$(cat "$OUT/$label".*.out 2>/dev/null | grep -c READY)" -eq "$n" ] && return 0
		sleep 0.1
	done
	fail "$label: the ranks never got READY: $(tail -3 "$OUT/$label".0.err)"
}
# end LABEL: let the ranks finish; each must exit 0.
end() {
	touch "$OUT/$1.done"
	local r st
	for r in "${!PIDS[@]}"; do
		st=0
		wait "${PIDS[r]}" || st=$?
		[ $st -eq 0 ] || fail "$1: rank $r exited $st: $(tail -3 "$OUT/$1.$r.err")"
	done
}
value() { # value FILE METRIC LABEL-MATCH: the first sample's value
	grep "^$2{" "$1" | grep -- "$3" | head -1 | awk '{print $NF}'
}

# ---- (a) ----
job a 3 WEFT_METRICS_PORT=$BASE WEFT_METRICS_FILE="$OUT/m.%r.prom" WEFT_METRICS_INTERVAL=0.2
for r in 0 1 2; do
	curl -sS -D "$OUT/h.$r" "http://127.0.0.1:$((BASE + r))/metrics" >"$OUT/t.$r" ||
		fail "rank $r: no answer on port $((BASE + r))"
done
grep -qi "^content-type: text/plain; version=0.0.4" "$OUT/h.0" && ok "text format 0.0.4" ||
	fail "content type: $(cat "$OUT/h.0")"
promtool check metrics <"$OUT/t.0" >"$OUT/promtool.out" 2>&1 && ok "promtool check metrics" ||
	fail "promtool check metrics: $(head -5 "$OUT/promtool.out")"
v=$(value "$OUT/t.1" weft_operations_total 'collective="allreduce"')
[ "$v" = 20 ] && ok "rank 1: 20 allreduces" || fail "rank 1: weft_operations_total allreduce $v"
v=$(grep '^weft_operation_bytes_total{.*collective="allreduce"' "$OUT/t.1" | awk '{s += $NF} END {print s}')
[ "$v" = $((20 << 20)) ] && ok "rank 1: 20 MiB of allreduce" || fail "rank 1: $v bytes of allreduce"
v=$(value "$OUT/t.2" weft_operations_total 'collective="alltoall"')
[ "$v" = 5 ] && ok "rank 2: 5 alltoalls" || fail "rank 2: weft_operations_total alltoall $v"
v=$(value "$OUT/t.0" weft_operation_seconds_count 'collective="allreduce",size="1M-16M"')
[ "$v" = 20 ] && ok "the 1 MiB allreduces in the 1M-16M histogram" || fail "histogram count $v"
bad=$(grep -v '^#' "$OUT/t.0" | grep -v 'weft_job="[0-9a-f]*",rank="0",host="[^"]*",leaf="[^"]*",comm="[0-9a-f]*"' | head -1)
[ -z "$bad" ] && ok "every series carries weft_job, rank, host, leaf, comm" || fail "a series without them: $bad"
n=$(grep -vc '^#' "$OUT/t.0")
[ "$n" -le 400 ] && ok "$n series for a rank of 3" || fail "$n series for a rank of 3"
curl -sS -D "$OUT/h.om" -H 'Accept: application/openmetrics-text; version=1.0.0' \
	"http://127.0.0.1:$BASE/metrics" >"$OUT/om.0"
grep -qi "^content-type: application/openmetrics-text; version=1.0.0" "$OUT/h.om" &&
	[ "$(tail -1 "$OUT/om.0")" = "# EOF" ] && grep -q '^# TYPE weft_operations counter$' "$OUT/om.0" &&
	ok "OpenMetrics when asked for it" || fail "OpenMetrics: $(head -3 "$OUT/h.om")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$BASE/other")
[ "$code" = 404 ] && ok "404 elsewhere" || fail "/other: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$BASE/metrics")
[ "$code" = 405 ] && ok "405 to a POST" || fail "POST: $code"
sleep 0.5
for r in 0 1 2; do
	promtool check metrics <"$OUT/m.$r.prom" >/dev/null 2>&1 || fail "promtool on m.$r.prom"
done
[ "$(value "$OUT/m.2.prom" weft_operations_total 'collective="allreduce"')" = 20 ] &&
	ok "the files: promtool accepts them, 20 allreduces" || fail "m.2.prom"
"$TOPO" --watch --once --interval 0.3 http://127.0.0.1:$BASE http://127.0.0.1:$((BASE + 1)) \
	"$OUT/m.2.prom" >"$OUT/once.txt" 2>&1 || fail "weft-topo --watch --once: $(cat "$OUT/once.txt")"
grep -q "3 of 3 targets answered" "$OUT/once.txt" && grep -q "rank 2 " "$OUT/once.txt" &&
	grep -q "^  *0 -> 1 " "$OUT/once.txt" && ok "weft-topo --watch --once" ||
	fail "--watch --once: $(cat "$OUT/once.txt")"
end a
[ "$(value "$OUT/m.0.prom" weft_operations_total 'collective="barrier"')" = 1 ] &&
	ok "the file's last write has the final barrier" || fail "m.0.prom after exit"
cp "$OUT"/m.*.prom "$OUT/textfile/" 2>/dev/null || { mkdir -p "$OUT/textfile" && cp "$OUT"/m.*.prom "$OUT/textfile/"; }

# ---- (b) ----
job b 3 WEFT_METRICS_PORT=$((BASE + 10)) WEFT_METRICS_PEERS=1
curl -sS "http://127.0.0.1:$((BASE + 10))/metrics" >"$OUT/b.0"
end b
grep -q '^weft_leaf_sent_bytes_total{.*peer_leaf="host:' "$OUT/b.0" && ! grep -q '^weft_peer_' "$OUT/b.0" &&
	[ "$(value "$OUT/b.0" weft_metrics_peers_aggregated '')" = 2 ] &&
	ok "WEFT_METRICS_PEERS=1: summed per peer leaf" || fail "WEFT_METRICS_PEERS=1: $(grep weft_leaf_sent "$OUT/b.0")"

# ---- (c) node_exporter's textfile collector ----
NE=$(command -v prometheus-node-exporter || true)
if [ -z "$NE" ]; then
	echo "skipped: prometheus-node-exporter not installed (scripts/install-deps.sh)"
else
	NEP=$((BASE + 20))
	"$NE" --web.listen-address=127.0.0.1:$NEP --collector.disable-defaults --collector.textfile \
		--collector.textfile.directory="$OUT/textfile" >"$OUT/ne.log" 2>&1 &
	NEPID=$!
	for ((i = 0; i < 50; i++)); do
		curl -sf "http://127.0.0.1:$NEP/metrics" >"$OUT/ne.txt" 2>/dev/null && break
		sleep 0.1
	done
	kill "$NEPID" 2>/dev/null
	wait "$NEPID" 2>/dev/null
	grep -q '^weft_operations_total{.*collective="allreduce".*rank="1".*} 20$' "$OUT/ne.txt" &&
		grep -q '^node_textfile_scrape_error 0$' "$OUT/ne.txt" &&
		ok "node_exporter's textfile collector serves Weft's series" ||
		fail "node_exporter: $(grep -E 'weft_operations_total|textfile' "$OUT/ne.txt" | head -5; tail -3 "$OUT/ne.log")"
fi

# ---- (d) ----
ldd "$BUILD/libweft.so" | grep -q microhttpd && fail "libweft links libmicrohttpd" ||
	ok "libweft does not link libmicrohttpd"
job d 3 WEFT_METRICS_PORT=$((BASE + 30)) WEFT_MHD_LIB=/nonexistent/libmicrohttpd.so.12
end d
grep -q "metrics: no endpoint on 127.0.0.1:$((BASE + 30)): WEFT_MHD_LIB: " "$OUT/d.0.err" &&
	ok "without libmicrohttpd: a warning, and the job ran" || fail "no warning: $(cat "$OUT/d.0.err")"
"$PY" -c 'import socket, time, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(30)' \
	$((BASE + 40)) &
HOLD=$!
sleep 0.3
job e 3 WEFT_METRICS_PORT=$((BASE + 40))
end e
kill $HOLD 2>/dev/null
grep -q "could not listen on 127.0.0.1:$((BASE + 40))" "$OUT/e.0.err" &&
	ok "a port in use: a warning, and the job ran" || fail "port in use: $(cat "$OUT/e.0.err")"

# ---- (e) ----
for bad in WEFT_METRICS_PORT=70000 WEFT_METRICS_PORT=abc WEFT_METRICS_ADDR=localhost \
	WEFT_METRICS_INTERVAL=0 WEFT_METRICS_PEERS=x WEFT_METRICS_CONNECTIONS=0; do
	expect_fail 1 "${bad%%=*}=${bad#*=}: expected" env "$bad" WEFT_BOOTSTRAP_TIMEOUT=5 \
		"$BUILD/allreduce_perf" -np 2 -b 8 -e 8 -n 1
done

# ---- (f) ----
promtool check rules "$REPO/docs/observability-alerts.yml" >"$OUT/rules.out" 2>&1 &&
	ok "promtool check rules docs/observability-alerts.yml" || fail "promtool check rules: $(cat "$OUT/rules.out")"

# ---- (g) the live view under tmux ----
if ! command -v tmux >/dev/null; then
	echo "skipped: tmux not installed"
else
	cat >"$OUT/loop.py" <<'EOF'
import os, sys, numpy as np, weft
comm = weft.Comm.from_env()
x = np.ones(1 << 18, dtype=np.float32)
stop = np.zeros(1, dtype=np.int32)
print("READY", flush=True)
while not stop[0]:  # every rank stops at the same call
    comm.allreduce(x)
    stop[0] = os.path.exists(sys.argv[1])
    comm.allreduce(stop, op="max")
EOF
	port=$(free_port) PIDS=()
	rm -f "$OUT/g.done"
	for r in 0 1 2; do
		extra=()
		[ $r -eq 1 ] && extra=(WEFT_PACER=dcqcn WEFT_PACER_START_RATE=8e6)
		env WEFT_RANK=$r WEFT_NRANKS=3 WEFT_ROOT=127.0.0.1:$port WEFT_SECRET="$SECRET" \
			WEFT_TRANSPORTS=socket WEFT_SOCKET_IFNAME=lo WEFT_LLDP=0 WEFT_TIMEOUT=60 \
			WEFT_METRICS_PORT=$((BASE + 50)) "${extra[@]}" PYTHONPATH="$REPO/python" \
			WEFT_BUILD="$BUILD" "$PY" "$OUT/loop.py" "$OUT/g.done" >"$OUT/g.$r.out" 2>"$OUT/g.$r.err" &
		PIDS+=($!)
	done
	sleep 2
	S=weft-watch-$$
	tmux new-session -d -s "$S" -x 160 -y 40 "$TOPO --watch http://127.0.0.1:$((BASE + 50)) http://127.0.0.1:$((BASE + 51)) http://127.0.0.1:$((BASE + 52))"
	# A frame with every rank and rates (a busy machine may starve an
	# endpoint for a frame or two): at most 15 s.
	for ((i = 0; i < 30; i++)); do
		sleep 0.5
		tmux capture-pane -p -t "$S" >"$OUT/pane.txt"
		grep -q "3 of 3 targets answered" "$OUT/pane.txt" && grep -q "<< slowest link" "$OUT/pane.txt" &&
			break
	done
	tmux send-keys -t "$S" q
	sleep 0.5
	tmux has-session -t "$S" 2>/dev/null && { fail "q did not quit the view"; tmux kill-session -t "$S"; } ||
		ok "q quits the view"
	end g
	sed 's/^/#   /' "$OUT/pane.txt"
	grep -q "3 of 3 targets answered" "$OUT/pane.txt" && grep -q "rank 0 " "$OUT/pane.txt" &&
		grep -q "rank 2 " "$OUT/pane.txt" && ok "the frame shows every rank" || fail "the frame's ranks"
	grep -q "^ *1 -> [02] .*<< slowest link" "$OUT/pane.txt" &&
		ok "rank 1's paced connection is the slowest link" || fail "the paced link is not marked slowest"
fi

weft_test_end test_metrics
