"""torch.distributed over kolo vs gloo, interleaved in one run (2+ ranks under torchrun):
all_reduce (float32, SUM) latency and bus bandwidth from 8 B to 64 MiB, then the DDP step time of
examples/torch/train.py's model. Both backends' groups live in the same processes and every
measurement alternates between them, so machine noise hits both alike. Rank 0 prints a
Markdown table.

    PYTHONPATH=build/python /usr/bin/python3 -m kolo_torch.run --nproc_per_node 2 \\
        bench/torch/compare.py [--max-bytes 67108864] [--rounds 3] [--ddp-steps 8]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import kolo_torch  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
import train  # noqa: E402


def time_allreduce(x, group, min_seconds):
    """Seconds per all_reduce: a warm-up, then as many iterations as fit in min_seconds (rank 0's
    count, shared so that every rank runs the same number)."""
    for _ in range(2):
        dist.all_reduce(x, group=group)
    iters, t0 = 0, time.perf_counter()
    while True:
        dist.all_reduce(x, group=group)
        iters += 1
        done = torch.tensor([1 if time.perf_counter() - t0 >= min_seconds else 0], dtype=torch.int32)
        dist.broadcast(done, 0, group=group)  # rank 0 decides when to stop
        if done.item():
            break
    # Time again without the stop checks, for exactly `iters` iterations.
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    return (time.perf_counter() - t0) / iters


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--rounds", type=int, default=3, help="alternations kolo/gloo per size (median)")
    p.add_argument("--seconds", type=float, default=0.15, help="time per measurement")
    p.add_argument("--ddp-steps", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"kolo": dist.new_group(backend="kolo"), "gloo": dist.new_group(backend="gloo")}
    sizes, b = [], 8
    while b <= a.max_bytes:
        sizes.append(b)
        b *= 8 if b < 32768 else 4
        if sizes[-1] == 32768:
            b = 65536
    rows = []
    for nbytes in sizes:
        x = torch.ones(max(1, nbytes // 4))
        t = {"kolo": [], "gloo": []}
        for _ in range(a.rounds):
            for name in ("kolo", "gloo"):
                t[name].append(time_allreduce(x, groups[name], a.seconds))
        med = {k: statistics.median(v) for k, v in t.items()}
        busbw = {k: 2 * (n - 1) / n * nbytes / v / 1e9 for k, v in med.items()}
        rows.append((nbytes, med, busbw))
    ddp = {"kolo": [], "gloo": []}
    args = train.parse(["--steps", str(a.ddp_steps), "--quiet", "--threads", str(a.threads),
                        "--dim", "128", "--layers", "4", "--seq", "128", "--batch", "8"])
    for _ in range(a.rounds):
        for name in ("kolo", "gloo"):
            ddp[name].append(train.train(args, group=groups[name])[1])
    if rank == 0:
        print("| bytes | kolo time (us) | gloo time (us) | kolo busbw (GB/s) | gloo busbw (GB/s) | busbw kolo/gloo |")
        print("|---:|---:|---:|---:|---:|---:|")
        for nbytes, med, bw in rows:
            print("| %d | %.1f | %.1f | %.3f | %.3f | %.2fx |" % (nbytes, med["kolo"] * 1e6, med["gloo"] * 1e6,
                                                                 bw["kolo"], bw["gloo"], bw["kolo"] / bw["gloo"]))
        k, g = statistics.median(ddp["kolo"]), statistics.median(ddp["gloo"])
        print()
        print("DDP step (examples/torch/train.py --dim 128 --layers 4 --seq 128 --batch 8, %d ranks): "
              "kolo %.1f ms, gloo %.1f ms, kolo/gloo %.2f" % (n, k * 1e3, g * 1e3, k / g))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
