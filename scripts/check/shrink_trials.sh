#!/usr/bin/env bash
# The long shrink series (docs/RELIABILITY.md, "Shrinking after a kill"): TRIALS (default 20)
# 4-rank jobs over shm or tcp running random collectives, one rank SIGKILLed at a random moment;
# every survivor must shrink to generation 1 and compute exactly (tests/collectives/
# test_shrink.cpp, Shrink.RandomKillTrials, says what each trial checks). Prints one line per
# trial and the median and worst time from the kill to the first collective on the shrunk group,
# to stdout and to build/shrink-<date>.log.
#   scripts/check/shrink_trials.sh [TRIALS [SEED]]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
. scripts/check/run_copies.sh
run_copies tests/collectives/shrink-test
log="$BUILD_DIR/shrink-$(date +%Y%m%d-%H%M%S).log"
KOLO_SHRINK_TRIALS=${1:-20} KOLO_SHRINK_SEED=${2:-$RANDOM$RANDOM} KOLO_TEST_WORKER="$bin/kolo-test-worker" \
  "$bin/shrink-test" --gtest_filter='Shrink.RandomKillTrials' 2>&1 | tee "$log" | grep -E '^shrink|Failure|^\[  (PASSED|FAILED)'
rc=${PIPESTATUS[0]}
echo "full log: $log"
exit "$rc"
