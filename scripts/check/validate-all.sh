#!/usr/bin/env bash
# Validates every collective with every algorithm: kolo-perf with -c 1 (every element checked)
# over N ranks (default 4) for sizes 8 B .. 16 MiB. Exits non-zero if any run reports a wrong
# element or fails. Usage: scripts/check/validate-all.sh [nranks] [maxbytes]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
N=${1:-4}
MAX=${2:-16M}
KOLORUN="$BUILD_DIR/tools/kolorun/kolorun"
PERF="$BUILD_DIR/bench/perf/kolo-perf"
# collective (kolo-perf name) : algorithms registered for it (src/algorithms/registry.cpp)
runs=(
  "allreduce:ring tree rd"
  "reducescatter:ring direct"
  "allgather:ring direct rd"
  "broadcast:ring tree"
  "reduce:tree direct"
  "gather:tree direct"
  "scatter:tree direct"
  "alltoall:pairwise"
  "sendrecv:direct"
)
fails=0
total=0
for entry in "${runs[@]}"; do
  coll=${entry%%:*}
  for algo in auto ${entry#*:}; do
    total=$((total + 1))
    out=$(KOLO_ALGO=$([ "$algo" = auto ] && echo "" || echo "$algo") timeout 600 \
          "$KOLORUN" -n "$N" "$PERF" "$coll" -b 8 -e "$MAX" -f 4 -n 2 -w 1 -c 1 2>&1)
    rc=$?
    wrong=$(echo "$out" | awk '/^ +[0-9]/ { w += ($9 ~ /^[0-9]+$/ ? $9 : 0) + ($13 ~ /^[0-9]+$/ ? $13 : 0) } END { print w + 0 }')
    if [ $rc -ne 0 ] || [ "$wrong" -ne 0 ]; then
      fails=$((fails + 1))
      echo "FAIL $coll algo=$algo ranks=$N: exit $rc, $wrong wrong elements"
      echo "$out" | tail -20
    else
      echo "ok   $coll algo=$algo ranks=$N: 0 wrong"
    fi
  done
done
echo "validate-all: $((total - fails)) of $total runs clean"
[ $fails -eq 0 ]
