# Sourced by scripts/env/device-check.sh: run_torch_stacks, a diagnosis of a kolo_torch CUDA job
# that does not finish (after the torch step built /tmp/py). Starts examples/torch/train.py
# --device cuda under DDP with 2 ranks, and if it still runs after TS_WAIT seconds (default 25)
# records, for each rank, the Python stacks of every thread (faulthandler, on SIGUSR1 first,
# then kills), the native stacks (gdb, where the machine has it) and each thread's kernel
# wait channel. One log: $OUT/torch-stacks.log.
run_torch_stacks() {
  step "torch stacks: a 2-rank CUDA DDP job, stacks of whatever still runs after ${TS_WAIT:-25} s"
  local log=$OUT/torch-stacks.log pid t
  : > "$log"
  PYTHONPATH=/tmp/py PYTHONFAULTHANDLER=1 KOLO_TS_FAULTHANDLER=1 timeout 90 python3 -m kolo_torch.run --nproc_per_node 2 \
    --master_addr 127.0.0.1 --master_port 29555 examples/torch/train.py --backend kolo --device cuda --global-batch 8 \
    --steps 6 --dim 32 --seq 32 --layers 2 > /tmp/ts-job.log 2>&1 &
  local job=$!
  for t in $(seq "${TS_WAIT:-25}"); do sleep 1; kill -0 $job 2>/dev/null || break; done
  if ! kill -0 $job 2>/dev/null; then
    wait $job; echo "job ended by itself: rc=$?" >> "$log"; cat /tmp/ts-job.log >> "$log"
    summary+=("torch stacks: the job ended by itself ($(grep -c . /tmp/ts-job.log) lines)"); return
  fi
  for pid in $(pgrep -f "examples/torch/train.py" | grep -v "^$job$"); do
    grep -q kolo_torch /proc/$pid/maps 2>/dev/null || continue
    echo "===== pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline | cut -c1-150)" >> "$log"
    for t in /proc/$pid/task/*; do
      echo "-- tid $(basename $t) $(cat $t/comm) wchan=$(cat $t/wchan 2>/dev/null) state=$(awk '{print $3}' $t/stat)" >> "$log"
      head -8 $t/stack 2>/dev/null >> "$log"
    done
    if command -v gdb >/dev/null; then
      timeout 40 gdb -p $pid -batch -ex "thread apply all bt 25" 2>/dev/null | grep -E '^(Thread|#)' | cut -c1-220 >> "$log"
    else
      echo "(no gdb here)" >> "$log"
    fi
    kill -ABRT $pid 2>/dev/null  # faulthandler prints every thread's Python stack
  done
  sleep 2; kill $job 2>/dev/null; wait $job 2>/dev/null
  echo "===== the job's output" >> "$log"; tail -c 60000 /tmp/ts-job.log >> "$log"
  summary+=("torch stacks: recorded ($(grep -c '^-- tid' "$log") threads)")
}
