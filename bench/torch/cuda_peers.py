"""torch.distributed all_reduce on CUDA tensors over kolo and, in the same processes and run,
over NCCL (issue 44: "where the machine's NCCL supports several ranks per GPU, run it side by
side"). Ranks may share one GPU (LOCAL_RANK modulo the visible devices): NCCL up to 2.29
refuses that ("Duplicate GPU detected"), and then the table says so in NCCL's own words rather
than leaving its column out silently. Each size alternates the backends --rounds times; a
figure is the median of the rounds' times per call, each the CUDA-event time of --iters
back-to-back calls on the current stream. busbw as nccl-tests: 2 (n - 1) / n x bytes / time.

    PYTHONPATH=build/python python3 -m kolo_torch.run --nproc_per_node 2 bench/torch/cuda_peers.py \\
        [--max-bytes 268435456] [--rounds 5] [--iters 20]

KOLO_CUDA_IPC=1 in the environment moves kolo's large operations over CUDA IPC (the engine's
direct path); without it they are staged through pinned host memory.
"""
import argparse
import os
import statistics

import torch
import torch.distributed as dist

import kolo_torch  # noqa: F401


def time_per_call(x, group, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier(group=group)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters  # microseconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("kolo")
    rank, size = dist.get_rank(), dist.get_world_size()
    kolo = dist.group.WORLD
    nccl, nccl_why = None, ""
    try:
        nccl = dist.new_group(backend="nccl")
        probe = torch.ones(1, device=dev)
        dist.all_reduce(probe, group=nccl)  # NCCL makes its communicator here
        torch.cuda.synchronize()
        if probe.item() != size:
            nccl_why = "NCCL probe gave %s, not %d" % (probe.item(), size)
    except Exception as e:  # noqa: BLE001  the refusal is the result to report
        nccl_why = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
    if nccl_why:
        nccl = None
    ipc = os.environ.get("KOLO_CUDA_IPC", "0")
    if rank == 0:
        # The header first and each row as it is measured: a run stopped by its time limit keeps
        # the sizes it finished.
        print("# %d ranks on %s (%s), torch %s, NCCL %s, KOLO_CUDA_IPC=%s" %
              (size, torch.cuda.get_device_name(dev), "one GPU" if torch.cuda.device_count() == 1 else
               "%d GPUs" % torch.cuda.device_count(), torch.__version__,
               ".".join(map(str, torch.cuda.nccl.version())), ipc))
        if nccl_why:
            print("# NCCL: %s" % nccl_why)
        print("| bytes | kolo us | kolo busbw GB/s | nccl us | nccl busbw GB/s | kolo/nccl time | kolo wrong |")
        print("|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    rows = []
    nbytes = 8
    while nbytes <= args.max_bytes:
        x = torch.ones(max(1, nbytes // 4), device=dev)
        times = {"kolo": [], "nccl": []}
        for _ in range(args.rounds):
            for name, group in (("kolo", kolo), ("nccl", nccl)):
                if group is not None:
                    times[name].append(time_per_call(x, group, args.iters))
        # Every element: a sum of ones over `size` ranks, (rounds x iters) times in place.
        x.fill_(1.0)
        dist.all_reduce(x, group=kolo)
        wrong = int((x != size).sum().item())
        bus = 2.0 * (size - 1) / size * nbytes
        k = statistics.median(times["kolo"])
        n = statistics.median(times["nccl"]) if times["nccl"] else None
        rows.append((nbytes, k, bus / k / 1e3, n, bus / n / 1e3 if n else None, wrong))
        if rank == 0:
            b, k, kb, n, nb, wrong = rows[-1]
            ns = "%.1f | %.2f | %.2f" % (n, nb, k / n) if n else "- | - | -"
            print("| %d | %.1f | %.2f | %s | %d |" % (b, k, kb, ns, wrong), flush=True)
        # x8 up to 256 KiB, then x4: 1, 4, 16, 64 and 256 MiB (the default --max-bytes, the size
        # kolo-ipc-test's ratio is taken at; x4 from 2 MiB stopped at 128 MiB).
        nbytes *= 8 if nbytes < (256 << 10) else 4
    if rank == 0:
        print("SUMMARY cuda_peers kolo_ipc=%s sizes=%d nccl=%s wrong=%d" %
              (ipc, len(rows), "refused" if nccl_why else "ran", sum(r[5] for r in rows)))
    dist.barrier(group=kolo)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
