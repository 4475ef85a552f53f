#!/usr/bin/env bash
# Instructions per synchronous collective (group of one) under callgrind, exact where timings on
# a shared machine are noise. Counts inside measure() of bench/micro/per_call_instructions.cpp
# for 1,000 and 3,000 calls and prints the difference per call.
#   scripts/per-call-instructions.sh [BUILD_DIR] [LIBKOLO_DIR]
# LIBKOLO_DIR: run against another build's libkolo (e.g. an older commit's) with the same program.
set -euo pipefail
build=${1:-build}
lib=${2:-$build}
prog=$build/bench/micro/kolo-per-call-instructions
command -v valgrind >/dev/null || { echo "per-call-instructions: needs valgrind (apt-get install valgrind)"; exit 1; }
count() {  # collective iterations -> instructions collected inside measure()
  LD_LIBRARY_PATH=$lib valgrind --tool=callgrind --toggle-collect=measure --callgrind-out-file=/dev/null \
    "$prog" "$1" "$2" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for c in allreduce broadcast barrier empty; do
  a=$(count $c 1000)
  b=$(count $c 3000)
  echo "$c: $(( (b - a) / 2000 )) instructions per call ($lib)"
done
