#!/usr/bin/env bash
# Interleaved A/B runs of kolo-perf: each repetition runs every configuration once, in turn, so
# that a change in the machine's load hits all of them alike; prints the median in-place time
# (µs) per size and configuration. A configuration is "label|build-dir|VAR=value VAR=value".
# The order rotates from one repetition to the next.
#   scripts/bench/ab-perf.sh RANKS REPS "kolo-perf args" "label|build|env" ...
#   scripts/bench/ab-perf.sh 2 7 "allreduce -b 16K -e 512K -f 2 -n 20" "auto|build|" "ring|build|KOLO_ALGO=allreduce=ring"
#   WARM=5 scripts/bench/ab-perf.sh 4 5 "allreduce -b 1M -e 8M -f 2 -n 20" "old|../old/build|" "new|build|"
# WARM: warm-up iterations (default 50). Checks are off (-c 0): this is for timing.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,8p' "$0"; exit 2; }
n=$1; reps=$2; args=$3; shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cfgs=("$@")
for rep in $(seq "$reps"); do
  # Each repetition starts one configuration further on, so that none always runs first (or
  # right after the same other one) on a machine whose state drifts within a repetition.
  for ((k = 0; k < ${#cfgs[@]}; k++)); do
    cfg=${cfgs[$(( (k + rep) % ${#cfgs[@]} ))]}
    IFS='|' read -r label dir envs <<< "$cfg"
    xs=()
    for e in $envs; do xs+=(-x "$e"); done
    # A build from before kolorun moved to tools/ has it in src/launcher/.
    kolorun=$dir/tools/kolorun/kolorun
    [ -x "$kolorun" ] || kolorun=$dir/src/launcher/kolorun
    # shellcheck disable=SC2086  # args is a list of words on purpose
    "$kolorun" -n "$n" "${xs[@]}" "$dir/bench/perf/kolo-perf" $args -c 0 -w "${WARM:-50}" 2>&1 |
      awk -v L="$label" '/^ +[0-9]+ / {print L, $1, $10}' >> "$out"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list); labels = []; sizes = []
for line in open(sys.argv[1]):
    label, size, t = line.split()
    d[(label, int(size))].append(float(t))
    if label not in labels: labels.append(label)
    if int(size) not in sizes: sizes.append(int(size))
print("size " + " ".join(f"{l:>14}" for l in labels))
for s in sizes:
    print(f"{s:>9} " + " ".join(f"{statistics.median(d[(l, s)]):>14.2f}" if d[(l, s)] else f"{'-':>14}" for l in labels))
PY
