"""One rank of test_elastic_ddp.py's named shrink: 3 ranks under kolorun; the last one leaves, the
others call kolo_torch.shrink(ranks_to_exclude=[2]) (torch.distributed.shrink_group, and so
kolo's Backend shrink hook, where torch has it) and check that the new group is the default one
and serves collectives, point-to-point, a later subgroup and DDP. Prints "rank R path P ok" (P: "hook" or "kolo")."""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo_torch


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host, port = os.environ["KOLO_STORE_ADDR"].rsplit(":", 1)
    store = dist.TCPStore(host, int(port), world, False, timeout=timedelta(seconds=20))
    dist.init_process_group("kolo", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=20))
    t = torch.ones(4)
    dist.all_reduce(t)
    assert t.tolist() == [float(world)] * 4, t
    leaver = world - 1
    if rank == leaver:
        # Named among the ranks to exclude, it must not join: kolo_torch.shrink says so.
        try:
            kolo_torch.shrink(ranks_to_exclude=[leaver])
        except RuntimeError as e:
            assert "exclu" in str(e), e
            sys.stdout.write("rank %d refused: %s\n" % (rank, str(e).splitlines()[0]))
            return
        raise AssertionError("rank %d: shrink did not refuse an excluded rank" % rank)
    hook = kolo_torch._C.backend_shrink_hook and hasattr(dist, "shrink_group")
    group = kolo_torch.shrink(ranks_to_exclude=[leaver], timeout=15)
    survivors = world - 1
    assert group.size() == survivors and group.rank() == rank, (group.size(), group.rank())
    # The shrunk default group is the default group now.
    assert dist.get_world_size() == survivors and dist.get_rank() == rank, (dist.get_world_size(), dist.get_rank())
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [float(sum(range(1, survivors + 1)))] * 5, t
    out = [torch.zeros(2) for _ in range(survivors)]
    dist.all_gather(out, torch.full((2,), float(rank)))
    assert [o[0].item() for o in out] == [float(r) for r in range(survivors)], out
    # Point-to-point runs on the shrunk p2p group: a ring.
    nxt, prv = (rank + 1) % survivors, (rank - 1) % survivors
    got = torch.zeros(3)
    reqs = [dist.isend(torch.full((3,), float(rank)), nxt), dist.irecv(got, prv)]
    for r in reqs:
        r.wait()
    assert got.tolist() == [float(prv)] * 3, got
    # A subgroup made after the shrink (KOLO_SPLIT_SHARE=1 from the test: on the shrunk world's
    # connections).
    sub = dist.new_group(list(range(survivors)), backend="kolo")
    t = torch.ones(2)
    dist.all_reduce(t, group=sub)
    assert t.tolist() == [float(survivors)] * 2, t
    # DDP on the shrunk group (under torch 2.14 it trusts the backend type the group was
    # registered with: kolo_torch.shrink keeps it "custom", see _shrink.py).
    torch.manual_seed(rank)  # different starting weights: DDP's construction broadcasts rank 0's
    net = DDP(torch.nn.Linear(3, 1), process_group=group)
    net(torch.full((2, 3), float(rank + 1))).sum().backward()
    grad = net.module.weight.grad
    assert grad.tolist() == [[float(sum(range(1, survivors + 1))) * 2 / survivors] * 3], grad
    dist.barrier()
    sys.stdout.write("rank %d path %s ok\n" % (rank, "hook" if hook else "kolo"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
