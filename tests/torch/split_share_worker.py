"""One rank of test_split_share.py: torch's new_group over kolo with KOLO_SPLIT_SHARE as the
launch sets it. Counts this process's sockets before and after making two subgroups (the even
and the odd ranks), then runs collectives and point-to-point on its subgroup, interleaved with
world all-reduces, each checked element by element against values computed here."""
import datetime
import json
import os
import traceback

import torch
import torch.distributed as dist


def open_sockets():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink("/proc/self/fd/" + fd).startswith("socket:")
        except OSError:
            pass
    return n


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    failures, checks = [], 0

    def same(name, got, want):
        nonlocal checks
        checks += 1
        if not torch.equal(got, want):
            failures.append("rank %d %s: got %s, want %s" % (rank, name, got.tolist(), want.tolist()))

    try:
        dist.barrier()
        before = open_sockets()
        groups = [dist.new_group([r for r in range(size) if r % 2 == c], backend="kolo") for c in (0, 1)]
        grown = open_sockets() - before
        members = [r for r in range(size) if r % 2 == rank % 2]
        sub, me, n = groups[rank % 2], members.index(rank), len(members)
        for i in range(5):
            x = torch.arange(10, dtype=torch.int64) * (rank + 1) + i
            dist.all_reduce(x, group=sub)
            same("subgroup all_reduce %d" % i, x, torch.arange(10, dtype=torch.int64) * sum(m + 1 for m in members) + i * n)
            w = torch.full((7,), float(rank))
            dist.all_reduce(w)
            same("world all_reduce %d" % i, w, torch.full((7,), float(sum(range(size)))))
            b = torch.full((5,), float(rank if me == n - 1 else -1))
            dist.broadcast(b, members[-1], group=sub)
            same("subgroup broadcast %d" % i, b, torch.full((5,), float(members[-1])))
            outs = [torch.zeros(3, dtype=torch.int32) for _ in range(n)]
            dist.all_gather(outs, torch.full((3,), rank * 10 + i, dtype=torch.int32), group=sub)
            for k, m in enumerate(members):
                same("subgroup all_gather %d from %d" % (i, m), outs[k], torch.full((3,), m * 10 + i, dtype=torch.int32))
            # Around the subgroup's ring: send to the next member, receive from the previous.
            nxt, prv = members[(me + 1) % n], members[(me - 1) % n]
            got = torch.zeros(4)
            reqs = [dist.irecv(got, prv, group=sub), dist.isend(torch.full((4,), rank + 0.5 + i), nxt, group=sub)]
            for q in reqs:
                q.wait()
            same("subgroup ring %d" % i, got, torch.full((4,), prv + 0.5 + i))
    except Exception:  # noqa: BLE001
        failures.append("rank %d: %s" % (rank, traceback.format_exc()))
        grown = -1
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"checks": checks, "failures": failures, "sockets_grown": grown}, f)
    dist.barrier()
    dist.destroy_process_group()
