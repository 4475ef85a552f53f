# kolo-perf on device memory (-g 1), sourced by scripts/env/device-check.sh, which defines $B (the
# carried build: bench/perf/kolo-perf, tools/kolorun/kolorun), $OUT, step and the summary array.
# run_perf: all-reduce -g 1 -c 1 with 1-4 ranks sharing the one GPU, the other collectives at 2
# ranks, the same all-reduce on host memory at 2 ranks (the device/host ratio: what staging
# through pinned host memory costs), and -g 2 refused. Timeouts total 132 s. Two files in $OUT:
# perf.log (every run's output) and perf.json (the 2-rank -g 1 all-reduce's --json rows).

# perf_one LABEL TIMEOUT RANKS ARGS...: one kolo-perf run under kolorun, its output appended to
# perf.log; sets perf_rc, perf_wrong (the footer's out-of-bounds count, "?" when none printed)
# and perf_bw (the largest size's out-of-place busbw, GB/s), perf_dev (GPU rank lines).
perf_one() {
  local label=$1 secs=$2 ranks=$3 tmp=/tmp/perf-one.log
  shift 3
  echo "-- $label: kolorun -n $ranks kolo-perf $*" >> "$OUT/perf.log"
  timeout "$secs" "$B/tools/kolorun/kolorun" -n "$ranks" "$B/bench/perf/kolo-perf" "$@" > "$tmp" 2>&1
  perf_rc=$?
  cat "$tmp" >> "$OUT/perf.log"
  perf_wrong=$(sed -n 's/^# Out of bounds values *: \([0-9]*\).*/\1/p' "$tmp" | head -1)
  perf_wrong=${perf_wrong:-?}
  perf_bw=$(awk '/^ *[0-9]+ +[0-9]+ /{bw=$8} END{print bw+0}' "$tmp")
  # nccl-tests' device line, e.g. "#  Rank  0 Group  0 Pid 123 on host device  0 [0000:1b:00] NVIDIA H200".
  perf_dev=$(grep -c '^#  Rank .* device .*\] NVIDIA' "$tmp")
}

run_perf() {
  step "kolo-perf -g 1: device memory, 1-4 ranks on one GPU"
  : > "$OUT/perf.log"
  local line="perf -g 1:" n coll secs
  local sweep=(-b 16 -e 64M -f 4 -n 5 -w 2 -c 1)  # 16 B ... 64 MiB, the last row the ratio's
  for n in 1 2 3 4; do
    secs=$((14 + 2 * n))  # 16, 18, 20, 22 s
    local extra=()
    [ "$n" = 2 ] && extra=(--json "$OUT/perf.json")
    perf_one "allreduce -g 1, $n ranks" "$secs" "$n" allreduce -g 1 "${sweep[@]}" "${extra[@]}"
    line+=" allreduce n=$n rc=$perf_rc wrong=$perf_wrong busbw=$perf_bw gpu-lines=$perf_dev;"
    [ "$n" = 2 ] && local dev_bw=$perf_bw
  done
  step "kolo-perf -g 1: the other collectives, 2 ranks"
  for coll in broadcast reducescatter allgather alltoall; do
    perf_one "$coll -g 1, 2 ranks" 10 2 "$coll" -g 1 -b 8 -e 16M -f 8 -n 5 -w 1 -c 1
    line+=" $coll rc=$perf_rc wrong=$perf_wrong;"
  done
  step "kolo-perf host memory, 2 ranks (the ratio's denominator)"
  perf_one "allreduce host, 2 ranks" 12 2 allreduce "${sweep[@]}"
  line+=" host allreduce n=2 rc=$perf_rc wrong=$perf_wrong busbw=$perf_bw;"
  line+=" device/host busbw at 64M: $(awk -v d="${dev_bw:-0}" -v h="$perf_bw" 'BEGIN{printf "%.2f", (h > 0 ? d / h : 0)}');"
  step "kolo-perf -g 2 must be refused (one GPU per process)"
  perf_one "allreduce -g 2 (must fail)" 6 1 allreduce -g 2 -b 8 -e 8
  local refused=no
  [ "$perf_rc" -ne 0 ] && grep -q -- '-g 2: kolo serves one GPU per process' "$OUT/perf.log" && refused=yes
  line+=" -g 2 rc=$perf_rc refused=$refused"
  grep -q '"memory": "device"' "$OUT/perf.json" 2>/dev/null && line+=" json=device" || line+=" json=MISSING"
  summary+=("$line")
  echo "$line"
}
