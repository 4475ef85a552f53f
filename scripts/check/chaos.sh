#!/usr/bin/env bash
# The long kill/stop series (docs/RELIABILITY.md): TRIALS (default 100) SIGKILL trials and as
# many SIGSTOP trials, each a 2-4 rank job over tcp or shm running random validated collectives
# (tests/collectives/test_chaos.cpp says what each trial checks). The per-trial lines and the
# summary go to stdout and to build/chaos-<date>.log.
#   scripts/check/chaos.sh [TRIALS [SEED [kill|stop|both]]]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
. scripts/check/run_copies.sh
run_copies tests/collectives/reliability-test
case "${3:-both}" in
  kill) filter='Chaos.Killed*' ;;
  stop) filter='Chaos.Stopped*' ;;
  *) filter='Chaos.*' ;;
esac
log="$BUILD_DIR/chaos-$(date +%Y%m%d-%H%M%S).log"
KOLO_CHAOS_TRIALS=${1:-100} KOLO_CHAOS_SEED=${2:-$RANDOM$RANDOM} KOLO_TEST_WORKER="$bin/kolo-test-worker" \
  "$bin/reliability-test" --gtest_filter="$filter" 2>&1 | tee "$log" | grep -E '^chaos|Failure|^\[  (PASSED|FAILED)'
rc=${PIPESTATUS[0]}
echo "full log: $log"
exit "$rc"
