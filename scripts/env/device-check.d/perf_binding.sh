# Sourced by scripts/env/device-check.sh: run_perf_binding, kolo-perf -g 1 all-reduce (8 B-1 MiB,
# 1 and 2 ranks on the GPU) with kolorun's default binding (a core per rank) and unbound: whether a
# rank bound to one core still gets its device operations' latency. One log: $OUT/perf-binding.log.
run_perf_binding() {
  step "kolo-perf -g 1: bound to a core (default) and unbound"
  local log=$OUT/perf-binding.log n bind line="perf binding:"
  : > "$log"
  for n in 1 2; do
    for bind in auto none; do
      echo "-- $n ranks, --bind-to $bind" >> "$log"
      timeout 30 "$B/tools/kolorun/kolorun" --bind-to $bind -n $n "$B/bench/perf/kolo-perf" allreduce -g 1 -b 8 -e 1M -f 8 \
        -n 20 -w 5 -c 1 > /tmp/pb.log 2>&1
      line+=" n=$n $bind rc=$? 8B=$(awk '$1==8 {print $6; exit}' /tmp/pb.log)us 1M=$(awk '$1==1048576 {print $6; exit}' /tmp/pb.log)us;"
      cat /tmp/pb.log >> "$log"
    done
  done
  summary+=("$line")
}
