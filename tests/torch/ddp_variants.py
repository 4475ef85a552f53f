"""Launched by torchrun: trains examples/torch/train.py's model under several DDP variants on
one backend, one after another in the same processes, and (rank 0) writes the per-step losses
as JSON to the file named by the last argument.

usage: ddp_variants.py BACKEND OUT.json
"""
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
import train  # noqa: E402

# name -> train.py flags; small model, a few steps each.
VARIANTS = {
    "plain": [],
    "no_sync": ["--accumulate", "2"],
    "find_unused": ["--find-unused-parameters"],
    "static_graph": ["--static-graph"],
    "fp16_hook": ["--hook", "fp16"],
    "bf16_hook": ["--hook", "bf16", "--accumulate", "2"],
    "small_buckets": ["--bucket-mb", "0.05"],
}
COMMON = ["--steps", "3", "--batch", "4", "--seq", "32", "--dim", "32", "--layers", "2", "--quiet"]


def over_float32(dtype):
    """For gloo, which cannot all-reduce bfloat16 in torch 1.13 nor float16 in Debian's torch 2.x:
    the compress hook's arithmetic with the sum done in float32 and rounded to `dtype` once. With
    2 ranks the float32 sum of two `dtype` values is exact, so this is the correctly rounded sum
    kolo computes."""
    def hook(process_group, bucket) -> torch.futures.Future[torch.Tensor]:
        world = process_group.size() if process_group is not None else dist.get_world_size()
        compressed = bucket.buffer().to(dtype).div_(world).to(torch.float32)
        fut = dist.all_reduce(compressed, group=process_group, async_op=True).get_future()

        def decompress(fut):
            out = bucket.buffer()
            out.copy_(fut.value()[0].to(dtype))
            return out

        return fut.then(decompress)
    return hook


def main():
    backend, out = sys.argv[1], sys.argv[2]
    if backend == "gloo":
        train.fp16_hook = over_float32(torch.float16)
        train.bf16_hook = over_float32(torch.bfloat16)
    # For gloo too: on a torch 2.x built without libuv (Debian's) env:// cannot join torchrun's
    # store without kolo_torch's fix (kolo_torch._libuv).
    import kolo_torch  # noqa: F401
    dist.init_process_group(backend)
    results = {}
    for name, flags in VARIANTS.items():
        losses, _ = train.train(train.parse(COMMON + ["--backend", backend] + flags))
        results[name] = losses
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
