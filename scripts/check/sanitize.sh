#!/usr/bin/env bash
# Builds kolo with sanitizers and runs the unit and multi-process suites under them.
#   scripts/check/sanitize.sh [asan|tsan]... [-- meson test args]
# asan: AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ (any error aborts the test);
# tsan: ThreadSanitizer in build-tsan/. Default: asan. Results go in docs/RELIABILITY.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
kinds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do kinds+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#kinds[@]} -eq 0 ] && kinds=(asan)
# The suites that exercise kolo's own code (the peers/bench suites drive Open MPI and Gloo);
# reliability: the short kill/stop trials and soak.
suites=(--suite unit --suite multiprocess --suite reliability)
rc=0
for k in "${kinds[@]}"; do
  case "$k" in
    asan) dir=build-asan; san=address,undefined ;;
    tsan) dir=build-tsan; san=thread ;;
    *) echo "sanitize.sh: unknown kind '$k' (asan|tsan)"; exit 2 ;;
  esac
  if [ ! -f "$dir/build.ninja" ]; then
    # CUDA off: nvcc objects are not instrumented. lundef off: sanitizer runtimes resolve at load.
    # torch and mpi off: their suites are not run here, and building them instrumented is slow.
    meson setup "$dir" --buildtype=debugoptimized -Db_sanitize="$san" -Db_lundef=false -Dcuda=disabled \
      -Dtorch=disabled -Dmpi=disabled >/dev/null || exit 1
  fi
  ninja -C "$dir" -j"$(nproc)" || exit 1
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:halt_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  # The soak's RSS bound means nothing here: ASan keeps freed memory in quarantine (256 MiB) and
  # both runtimes add shadow memory. Descriptors, mappings and wrong elements are still checked.
  export KOLO_SOAK_RSS_SLACK_KB=${KOLO_SOAK_RSS_SLACK_KB:-4194304}
  echo "== $k: meson test ${suites[*]} $*"
  meson test -C "$dir" --num-processes 1 --timeout-multiplier 4 --print-errorlogs "${suites[@]}" "$@" || rc=1
  log="$dir/meson-logs/testlog.txt"
  passed=$(grep -hoE '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  failed=$(grep -hoE '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  reports=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' "$log")
  echo "$k: $passed passed, $failed failed, $reports sanitizer report(s)"
  [ "$reports" -gt 0 ] && rc=1
done
exit $rc
