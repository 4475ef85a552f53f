"""One rank of test_elastic_ddp.py's grow case: 2 ranks under kolorun (which hosts the store,
KOLO_STORE_ADDR). With nobody waiting, kolo_torch.grow returns None at once (and after its wait,
with a wait) and the default group goes on; then rank 0 starts a process with KOLO_JOIN=1 (this
file again), which enters through kolo_torch.join, and the members' grow lets it in: every rank
checks that the grown group is the default one, at the rank and size expected, and serves
collectives, point-to-point, a subgroup made afterwards and DDP.

Prints "rank R none in S s", "rank R waited W s", "rank R grown ok" and "joiner grown ok"."""
import gc
import os
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo_torch

TIMEOUT = timedelta(seconds=20)


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def check_grown(me, size):
    """Collective over the grown default group of `size` ranks; `me`: this rank in it."""
    assert dist.get_world_size() == size and dist.get_rank() == me, (dist.get_world_size(), dist.get_rank())
    t = torch.full((5,), float(me + 1))
    dist.all_reduce(t)
    assert t.tolist() == [float(sum(range(1, size + 1)))] * 5, t
    # Point-to-point runs on the grown group's own p2p group: a ring.
    nxt, prv = (me + 1) % size, (me - 1) % size
    got = torch.zeros(3)
    reqs = [dist.isend(torch.full((3,), float(me)), nxt), dist.irecv(got, prv)]
    for r in reqs:
        r.wait()
    assert got.tolist() == [float(prv)] * 3, got
    # A subgroup made after the grow: torch names it after its count of groups, which the
    # joiner took from rank 0 (else it would wait under another name until its timeout).
    sub = dist.new_group(list(range(size)), backend="kolo", timeout=TIMEOUT)
    t = torch.ones(2)
    dist.all_reduce(t, group=sub)
    assert t.tolist() == [float(size)] * 2, t
    net = DDP(torch.nn.Linear(4, 2))
    net(torch.ones(3, 4)).sum().backward()
    w = net.module.weight.grad.clone()
    dist.all_reduce(w, op=dist.ReduceOp.MAX)
    assert torch.equal(w, net.module.weight.grad), "DDP's gradients differ between ranks"


def joiner():
    group = kolo_torch.join(timeout=TIMEOUT, wait=30)
    assert group is dist.group.WORLD or group == dist.distributed_c10d._get_default_group()
    check_grown(2, 3)
    say("joiner grown ok")
    dist.destroy_process_group()


def main():
    if os.environ.get("KOLO_JOIN") == "1":
        return joiner()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host, port = os.environ["KOLO_STORE_ADDR"].rsplit(":", 1)
    store = dist.TCPStore(host, int(port), world, False, timeout=TIMEOUT)
    dist.init_process_group("kolo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    world_pg = dist.distributed_c10d._get_default_group()
    # Nobody waiting: None, the cheap check of a step boundary.
    start = time.monotonic()
    assert kolo_torch.grow() is None
    say("rank %d none in %.3f s" % (rank, time.monotonic() - start))
    # With a wait: rank 0 looks for a joiner that long; the others wait for its answer.
    start = time.monotonic()
    assert kolo_torch.grow(wait=0.3) is None
    say("rank %d waited %.3f s" % (rank, time.monotonic() - start))
    assert dist.distributed_c10d._get_default_group() is world_pg
    t = torch.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [float(world)] * 3, t

    joiner_proc = None
    if rank == 0:
        env = dict(os.environ, KOLO_JOIN="1", RANK=str(world))
        joiner_proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env)
    group = kolo_torch.grow(wait=30, max_joiners=1)
    assert group is not None, "nobody joined within 30 s"
    assert group.size() == world + 1 and group.rank() == rank, (group.size(), group.rank())
    assert dist.distributed_c10d._get_default_group() is group
    # The old group was shut down by the grow: it refuses work.
    try:
        world_pg.allreduce([torch.ones(1)]).wait()
    except RuntimeError:
        pass
    else:
        raise AssertionError("rank %d: the group grow replaced still ran an all_reduce" % rank)
    check_grown(rank, world + 1)
    say("rank %d grown ok" % rank)
    dist.destroy_process_group()
    # The group's shutdown (collective, the joiner's too) runs when the last reference goes.
    del group
    gc.collect()
    if joiner_proc is not None:
        assert joiner_proc.wait(timeout=60) == 0, "the joiner failed"


if __name__ == "__main__":
    main()
