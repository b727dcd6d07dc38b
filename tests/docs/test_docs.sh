#!/bin/bash
# test_docs.sh — the shell blocks of README.md and docs/*.md, run as a user
# would paste them (tests/docs/blocks.py: how a block is marked and read).
#   (a) every marker is one the suite knows (a block is tested, or says
#       which exemption it falls under: install, suite or rdma);
#   (b) every unmarked block runs from the top of the tree with bash -e
#       -o pipefail, HOME a scratch directory, and exits 0 within
#       DOCS_BLOCK_TIMEOUT seconds (default 300);
#   (c) every program a "long" block names (a benchmark, a sweep) exists and
#       answers --help; make's targets answer make -n.
# The blocks marked "hosts N" run in tests/fabric/test_fabric_topo.sh, the
# "slurm" ones in tests/fabric/test_slurm.sh. The blocks name build/, so
# the suite runs only when WEFT_BUILD is the tree's build/ (77 otherwise).
# Exit: 0 pass, 1 fail, 77 skipped.

set -u
set -o pipefail

. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
weft_test_python
[ "$BUILD" = "$REPO/build" ] ||
	{ echo "SKIP: the documented commands name build/, and WEFT_BUILD is $BUILD"; exit 77; }
weft_test_scratch docs
cd "$REPO" || exit 1
BLOCKS=(tests/docs/blocks.py)
TIMEOUT=${DOCS_BLOCK_TIMEOUT:-300}

# ---- (a) the markers
if "$PY" "${BLOCKS[@]}" check >"$OUT/kinds" 2>"$OUT/check.err"; then
	ok "markers: $(cat "$OUT/kinds")"
else
	fail "markers: $(cat "$OUT/check.err")"
	weft_test_end test_docs
fi

# ---- (b) the blocks a user runs here
mkdir -p "$OUT/run" "$OUT/home"
for f in $("$PY" "${BLOCKS[@]}" write run "$OUT/run"); do
	where=$(head -n 1 "$f" | cut -c3-)
	t0=$SECONDS
	HOME=$OUT/home timeout -k 10 "$TIMEOUT" bash -e -o pipefail "$f" >"$f.out" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		ok "$where ($((SECONDS - t0)) s)"
	else
		fail "$where: exit $rc; the block:"
		sed -n '2,$p' "$f"
		echo "---- its output (last 30 lines):"
		tail -n 30 "$f.out"
	fi
done

# ---- (c) the long ones: what they run exists and answers (each once)
mkdir -p "$OUT/long"
declare -A CHECKED=()
for f in $("$PY" "${BLOCKS[@]}" write long "$OUT/long"); do
	where=$(head -n 1 "$f" | cut -c3-)
	"$PY" "${BLOCKS[@]}" programs "$f" >"$f.progs" || { fail "$where: cannot read it"; continue; }
	while read -r line; do
		eval "set -- $line" # blocks.py quoted each word (shlex.quote)
		prog=$1
		shift
		if [ "$prog" = make ]; then
			check=(make -n "$@")
		else
			check=("$prog" --help)
		fi
		[ -z "${CHECKED[${check[*]}]:-}" ] || continue
		CHECKED[${check[*]}]=1
		if timeout -k 5 30 "${check[@]}" >"$f.help" 2>&1 </dev/null; then
			ok "$where: ${check[*]}"
		else
			fail "$where: '${check[*]}' failed: $(head -c 300 "$f.help")"
		fi
	done <"$f.progs"
done

weft_test_end test_docs
