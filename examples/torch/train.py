"""A small byte-level GPT trained with torch DDP on the King James Bible (kolo-train's corpus).

Launch with torchrun; the backend is a flag, the training code is plain PyTorch DDP:

    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 examples/torch/train.py --backend kolo
    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 examples/torch/train.py --backend gloo
    ... examples/torch/train.py --backend kolo --device cuda   # on GPU LOCAL_RANK % GPUs

Prints "step N loss X" per optimizer step (X: the loss averaged over ranks). With fixed seeds
and one thread per rank the run is deterministic, so kolo and gloo print the same losses.
With --global-batch G every rank draws the same G sequences and trains on its 1/world share:
then any number of ranks trains like one rank with batch G (the same losses, up to the float
rounding of summing in another order).
"""
import argparse
import math
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def load_corpus(source):
    """Bytes of the corpus: "kjv" is the King James Bible from Debian's bible-kjv (verse
    references stripped, as kolo-train does), anything else a file path."""
    if source != "kjv":
        with open(source, "rb") as f:
            return f.read()
    try:
        raw = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("--data kjv: `bible` failed (apt-get install bible-kjv bible-kjv-text): %s" % e)
    return b"".join(line.split(b" ", 1)[-1] + b"\n" for line in raw.splitlines())


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, seq, dim, heads, layers, unused=False):
        super().__init__()
        self.tok = nn.Embedding(256, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 256, bias=False)
        # A layer forward never uses: DDP needs find_unused_parameters=True to train this model.
        self.unused = nn.Linear(dim, dim) if unused else None
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for b in self.blocks:
            x = b(x, self.mask[: idx.shape[1], : idx.shape[1]])
        return self.head(self.ln(x))


def fp16_hook(process_group, bucket) -> torch.futures.Future[torch.Tensor]:
    """default_hooks.fp16_compress_hook, looked up by this name so that a test can swap it."""
    return default_hooks.fp16_compress_hook(process_group, bucket)


def bf16_hook(process_group, bucket) -> torch.futures.Future[torch.Tensor]:
    """default_hooks.bf16_compress_hook under another name: torch 1.13's DDP refuses that hook by
    name unless NCCL >= 2.10 is present, although on CPU it only casts and all-reduces."""
    return default_hooks.bf16_compress_hook(process_group, bucket)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="kolo", help="kolo or gloo (default kolo)")
    p.add_argument("--data", default="kjv", help='"kjv" (default) or a text file')
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per micro-batch")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--accumulate", type=int, default=1,
                   help="micro-batches per step; all but the last run under DDP's no_sync()")
    p.add_argument("--find-unused-parameters", action="store_true",
                   help="add a layer forward never uses and pass find_unused_parameters=True")
    p.add_argument("--static-graph", action="store_true")
    p.add_argument("--hook", choices=["none", "fp16", "bf16"], default="none",
                   help="DDP communication hook: default_hooks.fp16_compress_hook / bf16_compress_hook")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the model, its gradients and DDP's buckets live (default cpu); cuda: GPU "
                        "LOCAL_RANK %% the number of GPUs, so that several ranks may share one")
    p.add_argument("--global-batch", type=int, default=0,
                   help="sequences per micro-batch over all ranks, drawn alike on every rank, each rank "
                        "training on its 1/world share (a multiple of the world size); default 0: --batch "
                        "sequences per rank, each rank drawing its own")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    return p.parse_args(argv)


def device_of(args):
    """The torch device this rank trains on: the CPU, or GPU LOCAL_RANK modulo the GPUs present."""
    if args.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())


def train(args, group=None):
    """Trains for args.steps steps on the initialized default group (or `group`). Returns the
    rank-averaged loss per step and the mean step time in seconds (steps after the first)."""
    torch.set_num_threads(args.threads)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = device_of(args)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.set_float32_matmul_precision("highest")  # no TF32: float32 as on the CPU
    if args.global_batch and args.global_batch % world:
        raise SystemExit("--global-batch %d is not a multiple of the %d ranks" % (args.global_batch, world))
    data = torch.frombuffer(bytearray(load_corpus(args.data)), dtype=torch.uint8).long()
    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = GPT(args.seq, args.dim, args.heads, args.layers, unused=args.find_unused_parameters).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, process_group=group,
              find_unused_parameters=args.find_unused_parameters, static_graph=args.static_graph,
              bucket_cap_mb=args.bucket_mb)
    if args.hook == "fp16":
        ddp.register_comm_hook(group, fp16_hook)
    elif args.hook == "bf16":
        ddp.register_comm_hook(group, bf16_hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr)
    if args.global_batch:  # every rank the same draws, of which it takes its share
        gen = torch.Generator().manual_seed(args.seed * 1000)
        draws, share = args.global_batch, args.global_batch // world
    else:  # each rank its own batches
        gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
        draws, share = args.batch, args.batch
    losses, times = [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for micro in range(args.accumulate):
            starts = torch.randint(0, data.numel() - args.seq - 1, (draws,), generator=gen)
            if args.global_batch:
                starts = starts[rank * share: (rank + 1) * share]
            window = torch.stack([data[s: s + args.seq + 1] for s in starts.tolist()]).to(device)
            x, y = window[:, :-1], window[:, 1:]

            def backward():
                logits = ddp(x)
                loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1)) / args.accumulate
                loss.backward()
                return loss.detach()

            if micro < args.accumulate - 1:
                with ddp.no_sync():
                    total += backward()
            else:
                total += backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        dist.all_reduce(total, group=group)
        loss = total.item() / world
        losses.append(loss)
        if rank == 0 and not args.quiet:
            print("step %d loss %.9f" % (step, loss), flush=True)
    step_time = sum(times[1:]) / max(1, len(times) - 1)
    return losses, step_time


def main(argv=None):
    args = parse(argv)
    try:
        # Registers the "kolo" backend; on a torch 2.x built without libuv (Debian's) it also
        # lets env:// join torchrun's store, which every backend needs.
        import kolo_torch  # noqa: F401
    except ImportError:
        if args.backend == "kolo":
            raise
    if args.device == "cuda":  # before the group: a backend may bind to the current device
        torch.cuda.set_device(device_of(args))
    dist.init_process_group(args.backend)  # env:// from torchrun
    losses, step_time = train(args)
    if dist.get_rank() == 0:
        print("final loss %.6f (perplexity %.2f), %.1f ms per step, backend %s, %d ranks, %s"
              % (losses[-1], math.exp(losses[-1]), step_time * 1e3, args.backend, dist.get_world_size(),
                 args.device), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
