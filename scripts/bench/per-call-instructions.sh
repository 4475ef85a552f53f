#!/usr/bin/env bash
# Instructions per synchronous collective under callgrind, exact where timings on a shared
# machine are noise. Counts inside measure() of bench/micro/per_call_instructions.cpp for 1,000
# and 3,000 calls and prints the difference per call.
#   scripts/bench/per-call-instructions.sh [BUILD_DIR] [LIBKOLO_DIR]
#     a group of one: allreduce, broadcast, barrier, empty (count 0)
#   scripts/bench/per-call-instructions.sh --versus-mpi [BUILD_DIR]
#     two ranks, each rank counted on its own: gather, scatter, broadcast, reduce and allreduce of
#     2 floats (1 for broadcast and allreduce) from or to rank 0, kolo (kolorun, shared memory)
#     against Open MPI (bench/peers/mpi_per_call_instructions.cpp, mpirun with vader)
# LIBKOLO_DIR: run against another build's libkolo (e.g. an older commit's) with the same program.
set -euo pipefail
versus_mpi=0
if [ "${1:-}" = --versus-mpi ]; then versus_mpi=1; shift; fi
build=${1:-build}
lib=${2:-$build}
prog=$build/bench/micro/kolo-per-call-instructions
command -v valgrind >/dev/null || { echo "per-call-instructions: needs valgrind (apt-get install valgrind)"; exit 1; }
collected() { sed -n 's/.*Collected : \([0-9]*\).*/\1/p'; }

if [ $versus_mpi = 0 ]; then
  count() {  # collective iterations -> instructions collected inside measure()
    LD_LIBRARY_PATH=$lib valgrind --tool=callgrind --toggle-collect=measure --callgrind-out-file=/dev/null \
      "$prog" "$1" "$2" 2>&1 | collected
  }
  for c in allreduce broadcast barrier empty; do
    a=$(count $c 1000)
    b=$(count $c 3000)
    echo "$c: $(( (b - a) / 2000 )) instructions per call ($lib)"
  done
  exit 0
fi

mpi_prog=$build/bench/peers/kolo-per-call-instructions-mpi
[ -x "$mpi_prog" ] && command -v mpirun >/dev/null ||
  { echo "per-call-instructions: --versus-mpi needs $mpi_prog and mpirun (libopenmpi-dev, openmpi-bin)"; exit 1; }
kolo_count() {  # collective rank iterations: rank `rank`'s instructions inside measure()
  # shellcheck disable=SC2016  # $RANK is the launched rank's, expanded there
  LD_LIBRARY_PATH=$lib "$build/tools/kolorun/kolorun" -n 2 --timeout 300 sh -c \
    'if [ "$RANK" = "$0" ]; then exec valgrind --tool=callgrind --toggle-collect=measure --callgrind-out-file=/dev/null "$@"; else exec "$@"; fi' \
    "$2" "$prog" "$1" "$3" 2>&1 | collected
}
mpi_count() {
  # shellcheck disable=SC2016
  mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np 2 sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = "$0" ]; then exec valgrind --tool=callgrind --toggle-collect=measure --callgrind-out-file=/dev/null "$@"; else exec "$@"; fi' \
    "$2" "$mpi_prog" "$1" "$3" 2>&1 | collected
}
echo "| 2 ranks | rank 0: kolo | Open MPI | rank 1: kolo | Open MPI |"
echo "|---|---:|---:|---:|---:|"
for c in gather scatter broadcast reduce allreduce; do
  row="| $c"
  for r in 0 1; do
    k=$(( ($(kolo_count $c $r 3000) - $(kolo_count $c $r 1000)) / 2000 ))
    m=$(( ($(mpi_count $c $r 3000) - $(mpi_count $c $r 1000)) / 2000 ))
    row="$row | $k | $m"
  done
  echo "$row |"
done
