#!/usr/bin/env bash
# fault_loop.sh — the full fault-injection loop for the note: TRIALS (102)
# trials of tests/faults/faults.c (4 ranks, mixed collectives, a random rank
# killed, stopped or aborted from a thread at a random moment, over shm,
# socket and ofi (WEFT_FAULT_OFI=0 leaves ofi out), WEFT_TIMEOUT=3), with
# the killed-peer bound at 1 s; every trial also checks that no survivor
# keeps a file descriptor after destroy; prints one line per trial and the
# table.
#   tests/faults/fault_loop.sh [TRIALS]     (after make; ~5 s a trial)
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
case ${1:-102} in *[!0-9]* | '') echo "usage: $0 [TRIALS]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../.."
build=${WEFT_BUILD:-build}
WEFT_FAULT_TRIALS=${1:-102} WEFT_BUILD=$build nice -n 10 "$build/tests/faults/faults" 2>/dev/null
