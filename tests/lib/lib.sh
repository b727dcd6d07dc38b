# tests/lib.sh — what the shell suites of tests/ share (tests/fabric/ has
# its own lib.sh for namespaces). Sourced, after `set -u -o pipefail`:
#
#   . "$(dirname "$0")/lib.sh"
#   weft_test_dirs           REPO, BUILD (WEFT_BUILD, default build, made
#                            absolute)
#   weft_test_python         PY: Debian's python3, else the one on PATH;
#                            SKIP (exit 77) if there is none
#   weft_test_scratch NAME   OUT: a directory under /tmp, removed at exit
#   ok MSG / fail MSG        report a check; fail counts into FAILS
#   expect_fail RC PATTERN CMD...
#                            CMD must exit RC with PATTERN (grep -E) in its
#                            standard error
#   weft_test_end NAME       PASS (exit 0) or FAIL with the count (exit 1)

weft_test_dirs() {
	REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	BUILD=${WEFT_BUILD:-build}
	case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
}

weft_test_python() {
	PY=/usr/bin/python3
	[ -x "$PY" ] || PY=$(command -v python3 || true)
	[ -n "$PY" ] || { echo "SKIP: python3 not found"; exit 77; }
}

weft_test_scratch() {
	OUT=$(mktemp -d "/tmp/weft-$1.XXXXXX")
	trap 'rm -rf -- "$OUT"' EXIT
}

FAILS=0
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
ok() { echo "ok: $*"; }

expect_fail() {
	local want=$1 pattern=$2
	shift 2
	"$@" >"$OUT/bad.out" 2>"$OUT/bad.err"
	local rc=$?
	if [ $rc -eq "$want" ] && grep -qE -- "$pattern" "$OUT/bad.err"; then
		ok "$* -> $rc, '$pattern'"
	else
		fail "$*: exit $rc (want $want), stderr: $(head -c 300 "$OUT/bad.err")"
	fi
}

weft_test_end() {
	if [ "$FAILS" -eq 0 ]; then
		echo "PASS: $1"
		exit 0
	fi
	echo "FAIL: $1 ($FAILS failed)"
	exit 1
}
