"""DDP that survives a lost rank: on a failure the survivors shrink their kolo group, roll back to
the last step every survivor completed, rebuild DDP on the new group and finish the run.

Launch with kolorun --elastic (a rank that dies does not stop the others) and the launcher's
store open to torch's TCPStore client (it hosts the store, so the store outlives rank 0 too):

    build/tools/kolorun/kolorun --elastic -n 4 -x KOLO_STORE_AUTH=off -x PYTHONPATH=build/python \\
        /usr/bin/python3 examples/torch/elastic_ddp.py --steps 40
    kill -9 <a rank's pid>   # printed as "rank R pid P"; the others go on with 3 ranks

torchrun cannot run it this way: its agent stops every worker when one fails and restarts the
whole group (--max-restarts), so there the job restarts from its checkpoints as usual.

--grow, with kolorun --replace N: kolorun starts a lost rank's replacement (KOLO_JOIN=1), which
enters through kolo_torch.join; the members let it in with kolo_torch.grow at a step boundary
(the first one after a shrink waits up to --grow-wait seconds for it, later ones only look),
rank 0 broadcasts the parameters, the optimizer state and the step, DDP is rebuilt on the grown
group and the run finishes at full size:

    build/tools/kolorun/kolorun --elastic --replace 1 -n 4 -x KOLO_STORE_AUTH=off \
        -x PYTHONPATH=build/python /usr/bin/python3 examples/torch/elastic_ddp.py --steps 40 --grow

The model is a small MLP fitted to a fixed random linear map. Step s trains on a global batch
drawn from seed s, each rank taking its 1/world share (by its rank in the current group), so the
run computes the same parameters at any number of ranks, before or after a shrink, up to the
rounding of summing in another order; --reference runs it in one process, without torch.distributed.

Prints "rank R pid P" once, "rank R step S world W loss L" per step, "rank R shrunk ..." after a
shrink, "rank R grew ..." after a grow, and last "rank R final <sha256 of the parameters>";
--out DIR also saves the final parameters to DIR/rank<R>.pt (R: the rank at launch). A
replacement says "replacement R" instead of "rank R" (R: the lost rank it replaces), "replacement
R joined ..." once in, and saves DIR/replacement<R>.pt.
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


def share_state(model, opt, step, group):
    """Collective over a group that just grew: rank 0's parameters, optimizer state and step go to
    every rank (the joiners hold nothing yet; the members take them too, so every rank holds the
    same bits). Returns the step to continue from."""
    box = [(model.state_dict(), opt.state_dict(), step)] if group.rank() == 0 else [None]
    dist.broadcast_object_list(box, src=0, group=group)
    model_state, opt_state, step = box[0]
    model.load_state_dict(model_state)
    opt.load_state_dict(opt_state)
    return step


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
    ap.add_argument("--grow", action="store_true",
                    help="after a shrink, let a replacement (kolorun --replace) in at a step boundary")
    ap.add_argument("--grow-wait", type=float, default=30,
                    help="seconds the first boundary after a shrink waits for a replacement to ask")
    ap.add_argument("--out", help="save the final parameters to OUT/rank<R>.pt")
    ap.add_argument("--reference", action="store_true", help="train in one process, no torch.distributed")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.reference:
        return reference(args)

    import kolo_torch  # noqa: F401  registers the "kolo" backend

    full_world = int(os.environ["WORLD_SIZE"])  # the launch's size, which a grow restores
    model = make_model()
    opt = make_optimizer(model)
    step = 0
    if os.environ.get("KOLO_JOIN") == "1":
        # A replacement (kolorun --replace): in through the members' grow, then their state.
        me = int(os.environ["RANK"])
        who = "replacement %d" % me
        say("%s pid %d" % (who, os.getpid()))
        group = kolo_torch.join(timeout=timedelta(seconds=args.timeout))
        step = share_state(model, opt, step, group)
        say("%s joined: now rank %d of %d at step %d" % (who, group.rank(), group.size(), step))
    else:
        me = init_distributed(timedelta(seconds=args.timeout))
        who = "rank %d" % me
        say("%s pid %d" % (who, os.getpid()))
        group = dist.group.WORLD
    net = DDP(model, process_group=group)
    # The state after the last two completed steps: a survivor may have finished the step in
    # which another one failed (its all-reduce completed before the loss), never two steps more.
    snapshots = {step: (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))}
    wait_for_joiner = False  # the first boundary after a shrink waits for the replacement
    while step < args.steps:
        try:
            if args.grow and group.size() < full_world:
                # The step boundary every rank of the group reaches with the same `step`.
                bigger = kolo_torch.grow(group, wait=args.grow_wait if wait_for_joiner else 0,
                                         max_joiners=full_world - group.size())
                wait_for_joiner = False
                if bigger is not None:
                    net = None  # its reducer belongs to the old group, which grow shut down
                    group = bigger
                    step = share_state(model, opt, step, group)
                    net = DDP(model, process_group=group)
                    # The joiners hold no earlier state: a rollback goes no further back than here.
                    snapshots = {step: (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))}
                    say("%s grew: now rank %d of %d at step %d" % (who, group.rank(), group.size(), step))
            loss = train_step(net, opt, step, group.rank(), group.size())
        except RuntimeError as e:
            say("%s: step %d failed: %s" % (who, step, str(e).splitlines()[0]))
            net = None
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
            say("%s shrunk: now rank %d of %d, resuming at step %d" % (who, group.rank(), group.size(), step))
            wait_for_joiner = True
            continue
        step += 1
        snapshots[step] = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
        snapshots.pop(step - 2, None)
        say("%s step %d world %d loss %.6f" % (who, step, group.size(), loss))
        time.sleep(args.step_delay)
    say("%s final %s" % (who, digest(model)))
    save(model, args.out, who.replace(" ", "") + ".pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
