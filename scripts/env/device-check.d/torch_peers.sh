# Sourced by scripts/env/device-check.sh (which defines $OUT, step and the summary array) after
# its torch step has compiled kolo_torch into /tmp/py. Defines run_torch_peers:
# bench/torch/cuda_peers.py, all_reduce on CUDA tensors over kolo and NCCL in the same processes,
# 2 ranks sharing the one GPU, 8 B to 256 MiB: kolo staged (KOLO_CUDA_IPC=0), then over CUDA IPC
# (KOLO_CUDA_IPC=1). NCCL's refusal of two ranks on one GPU, where it refuses, is reported in
# its own words. Timeouts 2 x 90 s. One log: $OUT/torch-peers.log; one summary line.
run_torch_peers() {
  step "torch peers: all_reduce on CUDA tensors, kolo (staged, then CUDA IPC) and NCCL, 2 ranks on one GPU"
  local log=$OUT/torch-peers.log line="torch peers:" ipc
  : > "$log"
  if ! ls /tmp/py/kolo_torch/_C*.so >/dev/null 2>&1; then
    summary+=("torch peers: no /tmp/py/kolo_torch/_C (the torch step builds it; it failed or did not run)")
    return
  fi
  for ipc in 0 1; do
    echo "== KOLO_CUDA_IPC=$ipc" >> "$log"
    KOLO_CUDA_IPC=$ipc PYTHONPATH=/tmp/py timeout -k 5 90 python3 -m kolo_torch.run --nproc_per_node 2 \
      bench/torch/cuda_peers.py --rounds "${PEERS_ROUNDS:-3}" --iters "${PEERS_ITERS:-10}" >> "$log" 2>&1
    line+=" ipc=$ipc rc=$? $(grep -h '^SUMMARY cuda_peers kolo_ipc='"$ipc" "$log" | sed 's/^SUMMARY cuda_peers //');"
  done
  grep -E '^(#|\|)' "$log" | head -40
  summary+=("$line")
}
