#!/usr/bin/env bash
# test_valgrind.sh — valgrind memcheck on a 2-rank AllReduce: each rank of
# build/allreduce_perf is its own process under valgrind (WEFT_RANK,
# WEFT_NRANKS, WEFT_ROOT, WEFT_SECRET: the manual launch), small sizes
# (8 B, 512 B and 32 KiB, every datatype, sum), --leak-check=full with
# definite leaks as errors, --track-fds=yes. Fails on any memcheck error,
# any definite leak, a descriptor other than the standard three still open
# at exit, or a wrong result. Exit 77 (skipped) without valgrind.
#   tests/test_valgrind.sh        (after make; make valgrind runs it)
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${WEFT_BUILD:-build}
perf=$build/allreduce_perf

if ! command -v valgrind >/dev/null; then
	echo "SKIP: valgrind not installed (scripts/install-deps.sh)"
	exit 77
fi
[ -x "$perf" ] || { echo "FAIL: $perf not built (make)"; exit 1; }
if ldd "$perf" "$build/libweft.so" 2>/dev/null | grep -q "lib[at]san"; then
	echo "SKIP: $perf is built with a sanitizer (make asan-test): valgrind cannot run it"
	exit 77
fi

out=$(mktemp -d /tmp/weft-valgrind.XXXXXX)
trap 'rm -rf "$out"' EXIT
secret=$(od -An -tx8 -N8 /dev/urandom | tr -d ' ')
# A port no socket here is bound to (another job's root may hold one).
for _ in 1 2 3 4 5 6 7 8; do
	port=$((20000 + RANDOM % 20000))
	ss -Htan 2>/dev/null | awk '{print $4}' | grep -q ":$port\$" || break
done
t0=$SECONDS

pids=()
for r in 0 1; do
	WEFT_RANK=$r WEFT_NRANKS=2 WEFT_ROOT=127.0.0.1:$port WEFT_SECRET=$secret \
		WEFT_BOOTSTRAP_TIMEOUT=120 WEFT_TIMEOUT=120 \
		timeout -k 5 300 valgrind -q --error-exitcode=1 --leak-check=full \
		--errors-for-leak-kinds=definite --track-fds=yes --log-file="$out/vg.$r" \
		"$perf" -b 8 -e 32K -f 64 -n 2 -w 1 -d all >"$out/out.$r" 2>"$out/err.$r" &
	pids+=($!)
done
fail=0
wait "${pids[0]}" || { rc=$?; echo "FAIL: rank 0 exited with $rc"; fail=1; }
[ $fail -eq 0 ] || kill "${pids[1]}" 2>/dev/null # rank 0 failed: rank 1 would wait for it
wait "${pids[1]}" || { rc=$?; echo "FAIL: rank 1 exited with $rc"; fail=1; }

for r in 0 1; do
	# Descriptors open at exit: valgrind lists each one ("Open file
	# descriptor N: ...", "Open AF_... socket N: ...") with where it was
	# opened on the next line; those inherited from the shell are not Weft's.
	left=$(grep -A1 "^==[0-9]*== Open " "$out/vg.$r" | grep -B1 "==    at \|==    by " |
		grep "== Open " || true)
	if [ -n "$left" ]; then
		echo "FAIL: rank $r left descriptors open at exit:"
		echo "$left"
		fail=1
	fi
	if grep -q "ERROR SUMMARY: [1-9]\|definitely lost: [1-9]\|Invalid \|uninitialised" \
		"$out/vg.$r"; then
		fail=1
	fi
done
# Rank 0 prints the table and a line that counts the wrong elements.
if ! grep -q "Out of bounds values : 0 OK" "$out/out.0"; then
	echo "FAIL: rank 0 did not report every result right"
	fail=1
fi

if [ $fail -ne 0 ]; then
	for r in 0 1; do
		echo "--- rank $r: valgrind"; cat "$out/vg.$r"
		echo "--- rank $r: stderr"; tail -20 "$out/err.$r"
		echo "--- rank $r: stdout"; tail -30 "$out/out.$r"
	done
	exit 1
fi
echo "ok: 2-rank allreduce_perf (8 B-32 KiB, every datatype) clean under valgrind memcheck" \
	"($((SECONDS - t0)) s)"
