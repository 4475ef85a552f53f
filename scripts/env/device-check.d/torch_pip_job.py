"""One rank of device-check.d/torch_pip.sh's job: kolo_torch as pip installed it (asserted: the
module comes from the venv given as argv[1]), on CPU tensors and, where argv[2] is "cuda", on
CUDA tensors of the one GPU both ranks share: all_reduce (sum) and broadcast, every element
checked, blocking and async_op=True. Prints one line per part with its time; any wrong element
raises (the launcher then exits non-zero).

    python -m kolo_torch.run --nproc_per_node 2 torch_pip_job.py VENV cpu|cuda
"""
import os
import sys
import time

import torch
import torch.distributed as dist

import kolo_torch

venv, devices = sys.argv[1], sys.argv[2].split(",")
here = os.path.realpath(kolo_torch.__file__)
assert here.startswith(os.path.realpath(venv) + os.sep), "kolo_torch from %s, not from %s" % (here, venv)

SIZES = (1, 1000, 300001, 4 << 20)  # elements: one, a few KiB, ~1.2 MiB, 16 MiB of float32


def check(what, got, want, rank):
    bad = int((got != want).sum().item())
    if bad:
        first = int((got != want).nonzero()[0].item())
        raise AssertionError("rank %d: %s: %d of %d elements wrong (first at %d: %s, want %s)" % (
            rank, what, bad, want.numel(), first, got[first].item(), want[first].item()))


def part(device, rank, size):
    """all_reduce and broadcast on `device`, float32 and int32, each size, blocking and async."""
    n_calls = 0
    for dtype in (torch.float32, torch.int32):
        for n in SIZES:
            base = torch.arange(n, dtype=torch.int64)
            # Sum of (i + 1000 * (r + 1)) over the ranks: exact in float32 up to 2^24 (4 Mi + 3000 fits).
            want = (base * size + 1000 * size * (size + 1) // 2).to(dtype).to(device)
            for async_op in (False, True):
                t = (base + 1000 * (rank + 1)).to(dtype).to(device)
                work = dist.all_reduce(t, async_op=async_op)
                if async_op:
                    work.wait()  # on CUDA: the current stream waits; the check below runs on it
                check("all_reduce %s n=%d async=%s on %s" % (dtype, n, async_op, device), t, want, rank)
                b = (base * 3 + 7).to(dtype).to(device) if rank == 1 else torch.zeros(n, dtype=dtype, device=device)
                work = dist.broadcast(b, src=1, async_op=async_op)
                if async_op:
                    work.wait()
                check("broadcast %s n=%d async=%s on %s" % (dtype, n, async_op, device), b,
                      (base * 3 + 7).to(dtype).to(device), rank)
                n_calls += 2
    if device != "cpu":
        torch.cuda.synchronize()
    return n_calls


def main():
    t0 = time.perf_counter()
    dist.init_process_group("kolo")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "kolo", dist.get_backend()
    print("rank %d: init_process_group(\"kolo\") %.2f s; torch %s (CUDA %s), kolo_torch._C.cuda=%s, from %s" % (
        rank, time.perf_counter() - t0, torch.__version__, torch.version.cuda, kolo_torch._C.cuda, here), flush=True)
    for device in devices:
        if device == "cuda":
            if not kolo_torch._C.cuda:
                raise SystemExit("rank %d: kolo_torch was installed without CUDA (its _build_info: TORCH_CUDA=%r, "
                                 "CUDA=%r) although torch %s has CUDA %s" % (
                                     rank, kolo_torch._build_info.TORCH_CUDA, kolo_torch._build_info.CUDA,
                                     torch.__version__, torch.version.cuda))
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
            device = "cuda:%d" % torch.cuda.current_device()
        dist.barrier()
        t = time.perf_counter()
        calls = part(device, rank, size)
        dist.barrier()
        print("rank %d: %s part OK: %d calls (all_reduce, broadcast; float32, int32; %s elements; blocking and "
              "async) every element checked, %.2f s" % (rank, device, calls, "/".join(map(str, SIZES)),
                                                       time.perf_counter() - t), flush=True)
    dist.destroy_process_group()
    print("rank %d of %d OK" % (rank, size), flush=True)


main()
