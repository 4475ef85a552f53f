"""The fixed cost of one torch.distributed call on kolo, on one rank (a group of 1: kolo's
all-reduce then moves nothing, so what is left is the cost of the layers, not of the peers'
scheduling, and the figure holds on a loaded machine): float32 all_reduce of 8 B through
dist.all_reduce (torch's Python, then pybind11, kolo_torch's backend and Work, then kolo), through
the backend object's allreduce([x]).wait() called directly (no torch Python), and the same with
async_op=True and the Work's future (what DDP uses). Each figure: the minimum over --batches
batches of --iters calls (the minimum filters out preemption).

With --builds DIR [DIR ...] it is a driver: it runs itself once per build directory (PYTHONPATH,
e.g. two copies of build/python, before and after a change) and alternates them --rounds times,
then prints the median per build: an A/B of kolo_torch builds in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/overhead.py
    /usr/bin/python3 bench/torch/overhead.py --builds /tmp/before build/python --rounds 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def measure(iters, batches):
    import torch
    import torch.distributed as dist
    import kolo_torch  # noqa: F401
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("kolo", init_method="file://" + os.path.join(tmp, "store"), rank=0, world_size=1)
        pg = dist.group.WORLD
        backend = pg._get_backend(torch.device("cpu")) if hasattr(pg, "_get_backend") else pg
        x = torch.ones(2)

        def best(fn):
            for _ in range(iters):
                fn()
            times = []
            for _ in range(batches):
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                times.append((time.perf_counter() - t0) / iters)
            return min(times)

        out = {
            "dist.all_reduce": best(lambda: dist.all_reduce(x)),
            "backend.allreduce().wait()": best(lambda: backend.allreduce([x]).wait()),
            "dist.all_reduce(async_op=True).wait()": best(lambda: dist.all_reduce(x, async_op=True).wait()),
            "backend.allreduce().get_future().wait()": best(lambda: backend.allreduce([x]).get_future().wait()),
        }
        dist.destroy_process_group()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--builds", nargs="*", help="build python directories to compare (driver mode)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if not a.builds:
        res = measure(a.iters, a.batches)
        if a.json:
            print(json.dumps(res))
        else:
            for k, v in res.items():
                print("%-42s %7.3f us" % (k, v * 1e6))
        return
    runs = {b: [] for b in a.builds}
    for _ in range(a.rounds):
        for b in a.builds:
            env = dict(os.environ, PYTHONPATH=b)
            out = subprocess.run([sys.executable, __file__, "--json", "--iters", str(a.iters), "--batches",
                                  str(a.batches)], env=env, stdout=subprocess.PIPE, check=True, text=True).stdout
            runs[b].append(json.loads(out.strip().splitlines()[-1]))
    keys = list(runs[a.builds[0]][0])
    print("median of %d alternating runs, each the minimum over %d batches of %d calls; us per call"
          % (a.rounds, a.batches, a.iters))
    print()
    print("| call | " + " | ".join(a.builds) + " |")
    print("|---|" + "---:|" * len(a.builds))
    for k in keys:
        print("| %s | %s |" % (k, " | ".join("%.3f" % (statistics.median(r[k] for r in runs[b]) * 1e6)
                                            for b in a.builds)))


if __name__ == "__main__":
    main()
