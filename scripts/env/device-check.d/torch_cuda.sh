# Sourced by scripts/env/device-check.sh (which defines $B, $D, $OUT, step and the summary array)
# after its torch step (run_torch) has compiled kolo_torch against that machine's torch into
# /tmp/py, with KOLO_TORCH_CUDA where that torch has CUDA. Defines run_torch_cuda: kolo_torch on
# CUDA tensors, 2 ranks sharing the one GPU (tests/torch/test_cuda.py):
#   collectives  every collective and point-to-point operation on device buffers, every element
#                checked; async_op=True + wait() + the tensor used on the current stream; the
#                future and then(); synchronize()/is_completed(); mixed host/device refused
#   ddp          examples/torch/train.py --device cuda under DDP, 2 ranks vs 1 rank with the same
#                global batch: the same losses (float32 tolerance), printed in the log
# and tests/torch/test_cuda_models.py (2 ranks on halves of a global batch vs one process on all of it):
#   fsdp2        examples/torch/train.py's GPT under fully_shard, 6 steps: the same losses and
#                every parameter at the end (float32 tolerance)
#   syncbn       a conv net converted with SyncBatchNorm.convert_sync_batchnorm under DDP: the same
#                losses, parameters and running statistics as plain BatchNorm over the whole batch;
#                plain BatchNorm on 2 ranks must differ (the check can fail)
# KOLO_REQUIRE_CUDA=1: a missing GPU or a kolo_torch built without CUDA fails instead of skipping.
# Timeouts: 130 s (the test's own 90 s, plus torch's start) + 90 s + 75 s + 75 s (the tests' own
# 60 s each, plus torch's start): 6.2 min at worst; ~2.5 min when all pass (ddp took 42 s on the H200).
# One log: $OUT/torch-cuda.log; one summary line.
run_torch_cuda() {
  step "torch CUDA: kolo_torch on CUDA tensors, 2 ranks on one GPU"
  local log=$OUT/torch-cuda.log line rc
  if ! ls /tmp/py/kolo_torch/_C*.so >/dev/null 2>&1; then
    summary+=("torch cuda: no /tmp/py/kolo_torch/_C (the torch step builds it; it failed or did not run)")
    return
  fi
  {
    nvidia-smi --query-gpu=name,compute_mode,memory.used,memory.total --format=csv,noheader
    PYTHONPATH=/tmp/py python3 -c 'import torch, kolo_torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      "devices", torch.cuda.device_count(), "kolo_torch._C.cuda", kolo_torch._C.cuda)'
  } > "$log" 2>&1
  line="torch cuda ($(tail -1 "$log" | sed 's/^torch //')):"
  # name, test file, -k expression, timeout in seconds
  for part in "collectives test_cuda.py collectives 130" "ddp test_cuda.py ddp 90" \
              "fsdp2 test_cuda_models.py fsdp2_on_one_gpu 75" "syncbn test_cuda_models.py sync_batchnorm 75"; do
    set -- $part
    KOLO_REQUIRE_CUDA=1 timeout -k 5 "$4" python3 tests/run_pytest.py /tmp/py "tests/torch/$2" \
      -q -s -k "$3" > "/tmp/torch-cuda-$1.log" 2>&1
    rc=$?
    { echo "== $2 -k $3: rc=$rc"; cat "/tmp/torch-cuda-$1.log"; } >> "$log"
    line+=" $1 rc=$rc ($(grep -hoE '^\[  (PASSED|FAILED) *\] [0-9]+ test' "/tmp/torch-cuda-$1.log" | tr '\n' ' '))"
  done
  # The comparisons' numbers (check_same_training and test_cuda_models.py print them; not
  # anchored: pytest -s prints a test's first line after the file's name).
  line+=" $(grep -hoE 'ddp cuda: max [^;]*' "$log" | tail -n 1)"
  line+="; $(grep -hoE 'fsdp2 cuda rank 0: [^;]*' "$log" | tail -n 1)"
  line+="; $(grep -hoE 'syncbn cuda rank 0: [^;]*' "$log" | tail -n 1)"
  line+="; $(grep -hoE 'syncbn cuda: plain BatchNorm[^;]*' "$log" | tail -n 1)"
  tail -n 5 "$log"
  summary+=("$line")
}
