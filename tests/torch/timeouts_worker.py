"""One rank of test_timeouts.py (3 ranks on kolo). Rank 0 runs each collective alone on a
subgroup of its own whose timeout is TIMEOUT_S (the others never call it) and records the error
text, which must say "Timed out" as c10d's backends do; likewise Work.wait(timeout) on a group
with a long timeout. The monitored barrier: all three pass it; rank 0 names rank 1 when only rank 1
stays away (rank 2, which came, times out waiting for rank 0's answer), and ranks 1 and 2 with
wait_all_ranks. Ranks 1 and 2 stay alive meanwhile (a dead peer is another error), meet
rank 0 at a world barrier, and every rank writes {"errors": {case: text}, "seconds": {case: s}}
to <out_dir>/<rank>.json."""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist

TIMEOUT_S = 1.5
WORLD_TIMEOUT_S = 120


def monitored_barrier(group, timeout, wait_all_ranks):
    """dist.monitored_barrier where torch lets a backend other than gloo serve it (2.x: any with
    a CPU device); torch 1.13's refuses every backend but gloo, so there the group's own method."""
    if torch.__version__ >= "2":
        return dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
    return (group or dist.group.WORLD).monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def collectives(size):
    """name -> fn(group) run by rank 0 alone."""
    t = lambda n=8: torch.ones(n)  # noqa: E731
    return {
        "barrier": lambda g: dist.barrier(group=g),
        "all_reduce": lambda g: dist.all_reduce(t(), group=g),
        # Rank 0 receives in each (a root that only sends may finish without its peers).
        "broadcast": lambda g: dist.broadcast(t(), 1, group=g),
        "reduce": lambda g: dist.reduce(t(), 0, group=g),
        "all_gather": lambda g: dist.all_gather([t() for _ in range(size)], t(), group=g),
        "all_gather_into_tensor": lambda g: dist.all_gather_into_tensor(t(8 * size), t(), group=g),
        "reduce_scatter_tensor": lambda g: dist.reduce_scatter_tensor(t(), t(8 * size), group=g),
        "gather": lambda g: dist.gather(t(), [t() for _ in range(size)], dst=0, group=g),
        "scatter": lambda g: dist.scatter(t(), None, src=1, group=g),
        "all_to_all_single": lambda g: dist.all_to_all_single(t(3 * size), t(3 * size), group=g),
        "recv": lambda g: dist.recv(t(), 1, group=g),
        "all_reduce async wait": lambda g: dist.all_reduce(t(), group=g, async_op=True).wait(),
    }


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=WORLD_TIMEOUT_S))
    short = datetime.timedelta(seconds=TIMEOUT_S)
    cases = collectives(size)
    # Every group is made by all ranks (new_group is collective), in one order.
    groups = {name: dist.new_group(backend="kolo", timeout=short) for name in cases}
    # The caller's wait runs out before the group's (long) timeout does.
    groups["Work.wait(timeout)"] = dist.new_group(backend="kolo")
    mb_one, mb_all = dist.new_group(backend="kolo"), dist.new_group(backend="kolo")
    errors, seconds = {}, {}

    def expect_error(name, fn):
        t0 = time.monotonic()
        try:
            fn()
            errors[name] = None
        except RuntimeError as e:
            errors[name] = str(e)
        seconds[name] = time.monotonic() - t0

    # All present: passes.
    expect_error("monitored_barrier all present", lambda: monitored_barrier(None, short, True))
    if rank != 1:  # rank 1 stays away; rank 2 comes, with rank 0 (it waits `short` for rank 0's answer)
        expect_error("monitored_barrier one missing", lambda: monitored_barrier(mb_one, short, False))
    if rank == 0:
        for name, fn in cases.items():
            expect_error(name, lambda fn=fn, name=name: fn(groups[name]))
        w = dist.all_reduce(torch.ones(8), group=groups["Work.wait(timeout)"], async_op=True)
        expect_error("Work.wait(timeout)", lambda: w.wait(datetime.timedelta(milliseconds=500)))
    if rank == 0:  # ranks 1 and 2 stay away
        expect_error("monitored_barrier all missing", lambda: monitored_barrier(mb_all, short, True))
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"errors": errors, "seconds": seconds}, f)
    dist.barrier()  # on the world group: nobody leaves before rank 0 is done
    os._exit(0)  # the subgroups hold failed operations: no orderly shutdown
