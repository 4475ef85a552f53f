#!/usr/bin/env bash
# The small-message selection, measured: for each collective with a choice of algorithms, the
# automatic choice against every other algorithm forced by name (KOLO_ALGO), interleaved
# (scripts/bench/ab-perf.sh), 8 B to 32 KiB per rank's buffer, medians in µs.
#   scripts/bench/algo-ab.sh [BUILD] [RANK COUNTS] [REPS]      e.g. scripts/bench/algo-ab.sh build "3 4 8" 5
# LIBS: extra VAR=value words for every configuration (device-check.sh passes LD_LIBRARY_PATH).
# COLLS: the collectives (default all eight with a choice).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}; counts=${2:-"4"}; reps=${3:-5}
args="-b 8 -e 32K -f 4 -n 50"
algos() {  # collective -> the algorithms raced against the automatic choice
  case $1 in
    allreduce) echo "rd oneshot tree ring" ;;
    allgather) echo "rd direct ring" ;;
    reducescatter) echo "direct ring" ;;
    broadcast) echo "tree ring" ;;
    reduce) echo "direct tree" ;;
    gather|scatter) echo "tree direct" ;;
    alltoall) echo "pairwise direct" ;;
  esac
}
key() { [ "$1" = reducescatter ] && echo reduce_scatter || echo "$1"; }
for n in $counts; do
  for c in ${COLLS:-allreduce allgather reducescatter broadcast reduce gather scatter alltoall}; do
    cfgs=("auto|$build|${LIBS:-}")
    for a in $(algos $c); do cfgs+=("$a|$build|${LIBS:-} KOLO_ALGO=$(key $c)=$a"); done
    echo "-- $c, $n ranks"
    WARM=${WARM:-50} scripts/bench/ab-perf.sh "$n" "$reps" "$c $args" "${cfgs[@]}"
  done
done
