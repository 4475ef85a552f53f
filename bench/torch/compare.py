"""torch.distributed over kolo vs gloo, interleaved in one run (2+ ranks under torchrun):
dist.all_reduce (float32, SUM) from 8 B to 64 MiB, blocking and with async_op=True (issue, then
wait() on the Work), then the DDP step time of examples/torch/train.py's model. Each backend on
its default transport on one host: kolo over shared memory, gloo over loopback TCP. Both
backends' groups live in the same processes and every measurement alternates between them, so
machine noise hits both alike; each figure is the median of --rounds alternations. Rank 0 prints
a Markdown table: time per call and gloo/kolo (how many times faster kolo is).

--overhead adds, at 8 B, where a torch call's time goes on top of the kolo operation under it:
dist.all_reduce (torch's Python layer, then the backend), the backend object's allreduce()
called directly (pybind11 and kolo_torch's ProcessGroupKolo and Work: no torch Python), against
kolo-perf's figure for the raw kolo call, measured by the caller with the same ranks.

    PYTHONPATH=build/python /usr/bin/python3 -m kolo_torch.run --nproc_per_node 2 \\
        bench/torch/compare.py [--max-bytes 67108864] [--rounds 3] [--ddp-steps 8] [--overhead]
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


def blocking(x, group):
    dist.all_reduce(x, group=group)


def async_wait(x, group):
    dist.all_reduce(x, group=group, async_op=True).wait()


def backend_direct(group):
    """The group's backend object's allreduce([x]).wait(): no torch.distributed Python on the way."""
    pg = group
    if hasattr(pg, "_get_backend"):  # torch 2.x: the ProcessGroup dispatches to per-device backends
        pg = pg._get_backend(torch.device("cpu"))

    def call(x, _group):
        pg.allreduce([x]).wait()
    return call


def timed(call, x, group, min_seconds):
    """Seconds per call: a warm-up, then as many iterations as fit in min_seconds (rank 0's count,
    shared so that every rank runs the same number), timed again without the stop checks."""
    for _ in range(3):
        call(x, group)
    iters, t0 = 0, time.perf_counter()
    while True:
        call(x, group)
        iters += 1
        done = torch.tensor([1 if time.perf_counter() - t0 >= min_seconds else 0], dtype=torch.int32)
        dist.broadcast(done, 0, group=group)  # rank 0 decides when to stop
        if done.item():
            break
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        call(x, group)
    return (time.perf_counter() - t0) / iters


def sizes_up_to(max_bytes):
    sizes, b = [], 8
    while b <= max_bytes:
        sizes.append(b)
        b *= 8 if b < 32768 else 4
        if sizes[-1] == 32768:
            b = 65536
    return sizes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--rounds", type=int, default=3, help="alternations kolo/gloo per cell (median)")
    p.add_argument("--seconds", type=float, default=0.15, help="time per measurement")
    p.add_argument("--ddp-steps", type=int, default=8, help="0: no DDP step")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--overhead", action="store_true", help="also the 8 B breakdown (see the docstring)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"kolo": dist.new_group(backend="kolo"), "gloo": dist.new_group(backend="gloo")}
    modes = {"blocking": blocking, "async": async_wait}
    rows = []
    for nbytes in sizes_up_to(a.max_bytes):
        x = torch.ones(max(1, nbytes // 4))
        t = {(m, b): [] for m in modes for b in groups}
        for _ in range(a.rounds):
            for m, call in modes.items():
                for b in groups:
                    t[(m, b)].append(timed(call, x, groups[b], a.seconds))
        rows.append((nbytes, {k: statistics.median(v) for k, v in t.items()}))
    overhead = None
    if a.overhead:
        x = torch.ones(2)
        t = {"dist.all_reduce": [], "backend.allreduce": []}
        for _ in range(max(a.rounds, 5)):
            t["dist.all_reduce"].append(timed(blocking, x, groups["kolo"], a.seconds))
            t["backend.allreduce"].append(timed(backend_direct(groups["kolo"]), x, groups["kolo"], a.seconds))
        overhead = {k: statistics.median(v) for k, v in t.items()}
    ddp = {"kolo": [], "gloo": []}
    if a.ddp_steps:
        args = train.parse(["--steps", str(a.ddp_steps), "--quiet", "--threads", str(a.threads),
                            "--dim", "128", "--layers", "4", "--seq", "128", "--batch", "8"])
        for _ in range(a.rounds):
            for name in ("kolo", "gloo"):
                ddp[name].append(train.train(args, group=groups[name])[1])
    if rank == 0:
        print("torch %s, %d ranks, float32 SUM all_reduce, median of %d; time per call in us; gloo/kolo: "
              "how many times faster kolo is" % (torch.__version__, n, a.rounds))
        print()
        print("| bytes | blocking kolo | blocking gloo | gloo/kolo | async kolo | async gloo | gloo/kolo |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for nbytes, med in rows:
            cells = []
            for m in modes:
                k, g = med[(m, "kolo")], med[(m, "gloo")]
                cells += ["%.1f" % (k * 1e6), "%.1f" % (g * 1e6), "%.1fx" % (g / k)]
            print("| %d | %s |" % (nbytes, " | ".join(cells)))
        if overhead:
            print()
            print("8 B on kolo: dist.all_reduce %.2f us, the backend's allreduce([x]).wait() called directly %.2f us"
                  % (overhead["dist.all_reduce"] * 1e6, overhead["backend.allreduce"] * 1e6))
        if a.ddp_steps:
            k, g = statistics.median(ddp["kolo"]), statistics.median(ddp["gloo"])
            print()
            print("DDP step (examples/torch/train.py --dim 128 --layers 4 --seq 128 --batch 8, %d ranks): "
                  "kolo %.1f ms, gloo %.1f ms, kolo/gloo %.2f" % (n, k * 1e3, g * 1e3, k / g))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
