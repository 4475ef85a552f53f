# Sourced by scripts/env/device-check.sh (which defines $B, $OUT, step and the summary array; it
# sources perf.sh too, whose perf_one this step calls, appending to $OUT/perf.log): the engine's direct device path over CUDA IPC
# (KOLO_CUDA_IPC=1, src/engine/device_direct.cpp), off by default until this step has passed.
# run_ipc_engine:
#   matrix  the collectives matrix on CUDA memory at 2, 3 and 4 ranks sharing the GPU with
#           KOLO_CUDA_IPC=1 KOLO_CUDA_IPC_MIN_BYTES=0 (every all-reduce, reduce, reduce-scatter
#           with sum on float32/16/bf16, every all-gather, broadcast, all-to-all goes over IPC;
#           the rest is staged), every element checked                          (timeout 200 s)
#   perf    kolo-perf -g 1 all-reduce, 2 ranks, 8 B ... 256 MiB, -c 1, staged (KOLO_CUDA_IPC=0)
#           then direct (KOLO_CUDA_IPC=1, default threshold 1 MiB): busbw at 256 MiB of each and
#           their ratio                                                        (timeouts 2 x 30 s)
# One log, $OUT/ipc-engine.log; one summary line.
run_ipc_engine() {
  step "engine over CUDA IPC: the device matrix with KOLO_CUDA_IPC=1, 2-4 ranks; kolo-perf staged vs direct"
  local log=$OUT/ipc-engine.log line="ipc engine:" filter="" w
  : > "$log"
  for w in 2 3 4; do filter+="${filter:+:}*DeviceMatrix*_world$w"; done
  # Straight into the log (tee), so that a run cut short by the call's time still shows how far
  # it got: run 7 ran out of time inside this matrix and brought back nothing of it.
  echo "== device matrix, KOLO_CUDA_IPC=1 KOLO_CUDA_IPC_MIN_BYTES=0 (${IPC_MATRIX_TIMEOUT:-200} s)" >> "$log"
  KOLO_CUDA_IPC=1 KOLO_CUDA_IPC_MIN_BYTES=0 KOLO_TEST_REAL_GPU=1 KOLO_TEST_WORKER=$B/tests/collectives/kolo-test-worker \
    timeout "${IPC_MATRIX_TIMEOUT:-200}" "$B/tests/collectives/collectives-test" --gtest_filter="$filter" 2>&1 |
    tee /tmp/ipc-engine-matrix.log >> "$log"
  line+=" matrix rc=${PIPESTATUS[0]} $(gtest_counts /tmp/ipc-engine-matrix.log);"
  grep -E '^\[  FAILED' /tmp/ipc-engine-matrix.log | head -10
  local staged=0 direct=0 mode
  for mode in 0 1; do
    KOLO_CUDA_IPC=$mode perf_one "allreduce -g 1, 2 ranks, KOLO_CUDA_IPC=$mode" 30 2 allreduce -g 1 -b 8 -e 256M -f 4 -n 5 -w 2 -c 1
    line+=" KOLO_CUDA_IPC=$mode rc=$perf_rc wrong=$perf_wrong busbw@256M=$perf_bw;"
    [ $mode = 0 ] && staged=$perf_bw || direct=$perf_bw
  done
  line+=" direct/staged $(awk -v d="$direct" -v s="$staged" 'BEGIN{printf "%.2f", (s > 0 ? d / s : 0)}')"
  echo "== kolo-perf runs: in perf.log" >> "$log"
  summary+=("$line")
  echo "$line"
}
