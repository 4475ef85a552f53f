"""DDP that survives a lost rank: on a failure the survivors shrink their kolo group, roll back to
the last step every survivor completed, rebuild DDP on the new group and finish the run.

Launch with kolorun --elastic (a rank that dies does not stop the others) and the launcher's
store open to torch's TCPStore client (it hosts the store, so the store outlives rank 0 too):

    build/tools/kolorun/kolorun --elastic -n 4 -x KOLO_STORE_AUTH=off -x PYTHONPATH=build/python \\
        /usr/bin/python3 examples/torch/elastic_ddp.py --steps 40
    kill -9 <a rank's pid>   # printed as "rank R pid P"; the others go on with 3 ranks

torchrun cannot run it this way: its agent stops every worker when one fails and restarts the
whole group (--max-restarts), so there the job restarts from its checkpoints as usual.

The model is a small MLP fitted to a fixed random linear map. Step s trains on a global batch
drawn from seed s, each rank taking its 1/world share (by its rank in the current group), so the
run computes the same parameters at any number of ranks, before or after a shrink, up to the
rounding of summing in another order; --reference runs it in one process, without torch.distributed.

Prints "rank R pid P" once, "rank R step S world W loss L" per step, "rank R shrunk ..." after a
shrink, and last "rank R final <sha256 of the parameters>"; --out DIR also saves the final
parameters to DIR/rank<R>.pt (R: the rank at launch).
"""
import argparse
import copy
import hashlib
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH = 24  # divisible by 1, 2, 3 and 4 ranks: every share is equal
FEATURES = 16


def say(text):
    # One write per line: print() writes the text and the newline apart, and the ranks share
    # kolorun's output, so another rank's line could land between them.
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)


def batch(step, rank, world):
    """This rank's share of step `step`'s global batch."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, FEATURES, generator=g)
    w = torch.linspace(-1, 1, FEATURES).unsqueeze(1)
    y = x @ w + 0.1 * torch.randn(GLOBAL_BATCH, 1, generator=g)
    share = GLOBAL_BATCH // world
    return x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]


def train_step(net, opt, step, rank, world):
    x, y = batch(step, rank, world)
    opt.zero_grad()
    loss = nn.functional.mse_loss(net(x), y)
    loss.backward()  # DDP averages the gradients over the group here (a failure surfaces here)
    opt.step()
    return loss.item()


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def save(model, out, name):
    if out:
        os.makedirs(out, exist_ok=True)
        torch.save([p.detach().clone() for p in model.parameters()], os.path.join(out, name))


def reference(args):
    model = make_model()
    opt = make_optimizer(model)
    for step in range(args.steps):
        train_step(model, opt, step, 0, 1)
    say("reference final %s" % digest(model))
    save(model, args.out, "reference.pt")


def init_distributed(timeout):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr = os.environ.get("KOLO_STORE_ADDR")
    if addr:
        # kolorun's store outlives every rank; a store hosted by rank 0 (env://) would die with
        # it and take every later shrink with it.
        host, port = addr.rsplit(":", 1)
        store = dist.TCPStore(host, int(port), world, False, timeout=timeout)
        dist.init_process_group("kolo", store=store, rank=rank, world_size=world, timeout=timeout)
    else:
        dist.init_process_group("kolo", timeout=timeout)
    return rank


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--step-delay", type=float, default=0.05, help="seconds of sleep per step (time to kill a rank)")
    ap.add_argument("--timeout", type=float, default=20, help="the group's timeout, seconds")
    ap.add_argument("--shrink-timeout", type=float, default=10, help="seconds the survivors wait for one another")
    ap.add_argument("--out", help="save the final parameters to OUT/rank<R>.pt")
    ap.add_argument("--reference", action="store_true", help="train in one process, no torch.distributed")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.reference:
        return reference(args)

    import kolo_torch  # noqa: F401  registers the "kolo" backend

    me = init_distributed(timedelta(seconds=args.timeout))
    say("rank %d pid %d" % (me, os.getpid()))
    group = dist.group.WORLD
    model = make_model()
    opt = make_optimizer(model)
    net = DDP(model, process_group=group)
    # The state after the last two completed steps: a survivor may have finished the step in
    # which another one failed (its all-reduce completed before the loss), never two steps more.
    snapshots = {0: (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))}
    step = 0
    while step < args.steps:
        try:
            loss = train_step(net, opt, step, group.rank(), group.size())
        except RuntimeError as e:
            say("rank %d: step %d failed: %s" % (me, step, str(e).splitlines()[0]))
            del net
            group = kolo_torch.shrink(group, timeout=args.shrink_timeout)
            # Where every survivor can resume: the fewest steps any of them completed.
            done = torch.tensor([step])
            dist.all_reduce(done, op=dist.ReduceOp.MIN, group=group)
            step = int(done.item())
            model_state, opt_state = snapshots[step]
            model = make_model()
            model.load_state_dict(model_state)
            opt = make_optimizer(model)
            opt.load_state_dict(opt_state)
            net = DDP(model, process_group=group)
            say("rank %d shrunk: now rank %d of %d, resuming at step %d" % (me, group.rank(), group.size(), step))
            continue
        step += 1
        snapshots[step] = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
        snapshots.pop(step - 2, None)
        say("rank %d step %d world %d loss %.6f" % (me, step, group.size(), loss))
        time.sleep(args.step_delay)
    say("rank %d final %s" % (me, digest(model)))
    save(model, args.out, "rank%d.pt" % me)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
