#!/usr/bin/env bash
# kolo-train with DDP (--zero 0) against ZeRO-1 (--zero 1) on the ~3.3 M-parameter model of
# docs/PERFORMANCE.md, interleaved (each repetition runs both, the order alternating, so a change
# in the machine's load hits both alike). Prints, per mode, the median over repetitions of the
# mean step time (the trainer's summary, first step excluded), the per-rank AdamW state bytes and
# the median over repetitions of the largest per-rank peak RSS (the trainer's "memory" lines:
# getrusage after the last step, before the final checkpoint).
#   scripts/bench/zero-ab.sh RANKS REPS [BUILD]
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,8p' "$0"; exit 2; }
n=$1; reps=$2; build=${3:-build}
out=$(mktemp); ckpt=$(mktemp -d)
trap 'rm -rf "$out" "$ckpt"' EXIT
for rep in $(seq "$reps"); do
  for k in 0 1; do
    zero=$(( (k + rep) % 2 ))
    "$build/tools/kolorun/kolorun" -n "$n" "$build/examples/train/kolo-train" --layers 4 --dim 256 --heads 8 \
      --seq 128 --batch 4 --threads 1 --steps 20 --eval-every 0 --sample-chars 0 --plot none --ckpt-every 0 \
      --bucket-mb 2 --first-bucket-mb 1 --ckpt "$ckpt/z$zero" --zero "$zero" 2>&1 |
      awk -v Z="$zero" '/^summary/ {for (i = 1; i < NF; i++) if ($i == "mean_step_ms") print Z, "step_ms", $(i + 1)}
                        /^memory rank/ {print Z, "state", $5; print Z, "rss_kb", $7}' >> "$out"
    rm -rf "${ckpt:?}/z$zero"
  done
done
python3 - "$out" "$n" "$reps" <<'PY'
import collections, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ranks, reps = int(sys.argv[2]), int(sys.argv[3])
step = collections.defaultdict(list); state = {}; rss = collections.defaultdict(list)
for z, what, v in rows:
    if what == "step_ms": step[z].append(float(v))
    elif what == "state": state[z] = int(v)
    else: rss[z].append(int(v))
# rss: ranks values per run, in run order; the largest rank of each run, then the median over runs.
peak = {z: statistics.median(max(v[i:i + ranks]) for i in range(0, len(v), ranks)) for z, v in rss.items()}
print(f"ranks {ranks}, {reps} repetitions")
for z, name in (("0", "DDP"), ("1", "ZeRO-1")):
    print(f"{name:7} step_ms median {statistics.median(step[z]):8.1f} (runs: {' '.join(f'{x:.0f}' for x in step[z])})"
          f"  adamw_state_bytes/rank {state[z]}  peak_rss_MiB/rank {peak[z] / 1024:.1f}")
print(f"ZeRO-1/DDP step time {statistics.median(step['1']) / statistics.median(step['0']):.3f}")
PY
