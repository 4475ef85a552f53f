#!/usr/bin/env bash
# The long soak (docs/RELIABILITY.md): COLLECTIVES (default 10000) random validated collectives
# (random op, dtype, size up to 1 MiB, root, algorithm, placement, subgroup episodes) on RANKS
# ranks (default 4), over shm and then tcp, sampling each rank's descriptors, RSS, mapped
# /dev/shm files and the job's /dev/shm entries every SAMPLE_EVERY collectives; prints each
# rank's min/max (tests/collectives/test_soak.cpp says what is asserted).
#   scripts/check/soak.sh [COLLECTIVES [RANKS [SAMPLE_EVERY]]]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
. scripts/check/run_copies.sh
run_copies tests/collectives/reliability-test
KOLO_SOAK_COLLECTIVES=${1:-10000} KOLO_SOAK_RANKS=${2:-4} KOLO_SOAK_SAMPLE_EVERY=${3:-250} \
  KOLO_TEST_WORKER="$bin/kolo-test-worker" "$bin/reliability-test" --gtest_filter='Soak.*'
