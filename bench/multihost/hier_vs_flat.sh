#!/usr/bin/env bash
# Hierarchical against flat all-reduce on namespace "hosts" (tests/multihost/netns-hosts.sh)
# whose links are shaped to RATE Mbit/s (tbf on the switch ports): HOSTS hosts of PER ranks,
# launched by kolorun --hosts, kolo-perf allreduce with KOLO_ALGO=allreduce=ring and =hier
# interleaved REPS times in one run. Prints one row per size: the best time of each and
# flat/hier (> 1: hierarchical is faster). Root only (namespaces).
#   bench/multihost/hier_vs_flat.sh [--build-dir build] [--rate 1000] [--hosts 4] [--per 2] [--reps 2]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build RATE=1000 HOSTS=4 PER=2 REPS=2 MIN=1M MAX=64M
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --per) PER=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    *) sed -n '2,8p' "$0"; exit 2 ;;
  esac
done
NET=tests/multihost/netns-hosts.sh
WORK=$(mktemp -d /tmp/kolo-hvf.XXXXXX)
trap '"$NET" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
"$NET" up --hosts "$HOSTS" --rate "$RATE" > /dev/null
hosts=""
for ((h = 0; h < HOSTS; h++)); do hosts+="${hosts:+,}kolo-h$h:$PER"; done
for ((rep = 1; rep <= REPS; rep++)); do
  for algo in ring hier; do
    KOLO_SECRET=hier-bench "$BUILD/tools/kolorun/kolorun" --hosts "$hosts" --launch-agent 'ip netns exec {host}' \
      -x KOLO_ALGO=allreduce=$algo -x KOLO_SOCKET_IFNAME=eth \
      "$BUILD/bench/perf/kolo-perf" allreduce -b "$MIN" -e "$MAX" -f 4 -w 2 -n 5 -c 0 > "$WORK/$algo.$rep" 2>&1
  done
done
echo "# $HOSTS hosts x $PER ranks, links shaped to $RATE Mbit/s (tbf), f32 sum all-reduce out of place, best of $REPS interleaved runs"
echo "# $(date -u +%F) $(uname -n), kolo-perf time in us"
printf "%12s %12s %12s %10s\n" bytes flat_ring hier flat/hier
awk '
  FNR == 1 { algo = (FILENAME ~ /\/hier\.[0-9]+$/) ? "hier" : "ring" }
  /^ +[0-9]+ +[0-9]+ +float/ { t = $6 + 0; k = algo SUBSEP $1; if (!(k in best) || t < best[k]) best[k] = t; sizes[$1] = 1 }
  END {
    for (s in sizes) { r = best["ring", s]; h = best["hier", s]
      printf "%12d %12.0f %12.0f %10.2f\n", s, r, h, (h > 0 ? r / h : 0) }
  }' "$WORK"/ring.* "$WORK"/hier.* | sort -n
