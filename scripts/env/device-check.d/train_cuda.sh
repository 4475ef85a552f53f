# kolo-train --device cuda and DDP over device memory (issue 43 item 5), sourced by
# scripts/env/device-check.sh, which defines $B (the carried build), $OUT, step and the summary
# array. run_train_cuda runs, at most 120 s in all:
#   gpt-cuda    the GPU model against the double CPU model: forward loss, logits, every gradient
#               (1e-4 of each tensor's largest), the on_ready order, AdamW and the norm (20 s),
#               then again under compute-sanitizer memcheck (the kernels' bounds) (20 s)
#   train-cuda  kolo-train --device cuda: 2 ranks x batch 4 == 1 rank x batch 8 for 10 steps on
#               the one GPU (both ranks share it), and the first loss equal to the CPU model's;
#               the losses of each run are printed to the log (60 s)
#   ddp device  DistributedDataParallel over cudaMalloc'd gradients, 2 and 3 ranks on the GPU,
#               every element equal to the host reducer's (KOLO_TEST_REAL_GPU=1) (20 s)
# One log: $OUT/train-cuda.log; one summary line with the gtest counts and the two loss lines.
CARRY_train_cuda=(tests/train/kolo-test-gpt-cuda tests/train/kolo-test-train-cuda tests/ddp/ddp-process-test
                  tests/ddp/ddp-test-worker)

run_train_cuda() {
  step "kolo-train --device cuda: the GPU model, 2 ranks x b == 1 rank x 2b, DDP on device memory"
  local log=$OUT/train-cuda.log line rc dir
  : > "$log"
  # cuBLAS comes from the CUDA toolkit there; failing that, from torch's wheels.
  if ldd "$B/examples/train/kolo-train" | grep -q 'libcublas.*not found'; then
    dir=$(dirname "$(find /usr /opt -name 'libcublas.so.13' 2>/dev/null | head -n 1)")
    echo "libcublas.so.13 not on the library path; using $dir" >> "$log"
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
  fi
  ldd "$B/examples/train/kolo-train" "$B/tests/train/kolo-test-gpt-cuda" | grep 'not found' >> "$log"
  line="train cuda:"
  timeout -k 5 20 "$B/tests/train/kolo-test-gpt-cuda" > /tmp/gpt-cuda.log 2>&1
  rc=$?
  { echo "== kolo-test-gpt-cuda: rc=$rc"; cat /tmp/gpt-cuda.log; } >> "$log"
  line+=" gpt-cuda rc=$rc ($(gtest_counts /tmp/gpt-cuda.log))"
  timeout -k 5 20 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/train/kolo-test-gpt-cuda" \
    --gtest_brief=1 > /tmp/gpt-cuda-memcheck.log 2>&1
  rc=$?
  { echo "== memcheck kolo-test-gpt-cuda: rc=$rc"; tail -n 40 /tmp/gpt-cuda-memcheck.log; } >> "$log"
  line+=" memcheck rc=$rc ($(grep -h 'ERROR SUMMARY' /tmp/gpt-cuda-memcheck.log | tr '\n' ' '))"
  KOLORUN=$B/tools/kolorun/kolorun KOLO_TRAIN=$B/examples/train/kolo-train timeout -k 5 60 \
    "$B/tests/train/kolo-test-train-cuda" > /tmp/train-cuda.log 2>&1
  rc=$?
  { echo "== kolo-test-train-cuda: rc=$rc"; cat /tmp/train-cuda.log; } >> "$log"
  line+=" train-cuda rc=$rc ($(gtest_counts /tmp/train-cuda.log))"
  KOLO_TEST_REAL_GPU=1 KOLO_DDP_WORKER=$B/tests/ddp/ddp-test-worker timeout -k 5 20 \
    "$B/tests/ddp/ddp-process-test" --gtest_filter='*DeviceBuffers*' > /tmp/ddp-device.log 2>&1
  rc=$?
  { echo "== ddp-process-test DeviceBuffers (KOLO_TEST_REAL_GPU=1): rc=$rc"; cat /tmp/ddp-device.log; } >> "$log"
  line+=" ddp device rc=$rc ($(gtest_counts /tmp/ddp-device.log))"
  grep -h 'losses:' /tmp/train-cuda.log
  summary+=("$line")
  summary+=("$(grep -h 'losses:' /tmp/train-cuda.log | tr '\n' ';')")
}
