"""One rank of test_fsdp2.py (torch >= 2.4): the default group is kolo, a gloo group spans the
same ranks, and each check runs on a DeviceMesh over either, in the same processes.

- FSDP2: examples/torch/train.py's GPT (small: 2 blocks, dim 32) under fully_shard (each block,
  then the root), AdamW, STEPS steps on each rank's own batches; the rank-averaged loss per step.
  Variant "fp32", or "bf16": MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32).
- DTensor: a tensor of uneven size Shard(0) -> Replicate -> Shard(1) -> Shard(0), and Partial
  (sum, avg) -> Replicate / Shard(0), each result compared with the full tensor's slices.

It also counts the torch.distributed calls FSDP2 makes (wrapping the module functions it calls),
to show which collectives and reduce ops the proof covers. Writes to <out_dir>/<rank>.json:
{"losses": {"kolo": [...], "gloo": [...]}, "dtensor": {"kolo": [failures], "gloo": [...]},
 "calls": {name: count}, "reduce_ops": [...]}."""
import collections
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
import train  # noqa: E402

STEPS = 20
SEQ, DIM, HEADS, LAYERS, BATCH = 32, 32, 4, 2, 4


def fsdp_api():
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # 2.6+
    except ImportError:
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard  # 2.4, 2.5
    return fully_shard, MixedPrecisionPolicy


def count_calls(calls, reduce_ops):
    """Wraps the torch.distributed functions FSDP2 and DTensor reach, to count them."""
    for name in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_gather_single", "reduce_scatter_single",
                 "all_reduce", "all_to_all_single"):
        fn = getattr(dist, name, None)
        if fn is None:
            continue

        def wrapped(*a, _fn=fn, _name=name, **kw):
            calls[_name] += 1
            op = kw.get("op")
            if op is not None:
                reduce_ops.add(str(op))
            return _fn(*a, **kw)
        setattr(dist, name, wrapped)


def fsdp_losses(mesh, group, variant, data):
    fully_shard, MixedPrecisionPolicy = fsdp_api()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    model = train.GPT(SEQ, DIM, HEADS, LAYERS)
    kw = {"mesh": mesh}
    if variant == "bf16":
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1000 + rank)
    losses = []
    for _ in range(STEPS):
        starts = torch.randint(0, data.numel() - SEQ - 1, (BATCH,), generator=gen)
        window = torch.stack([data[s: s + SEQ + 1] for s in starts.tolist()])
        x, y = window[:, :-1], window[:, 1:]
        loss = F.cross_entropy(model(x).float().reshape(-1, 256), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = loss.detach().clone()
        dist.all_reduce(total, group=group)
        losses.append(total.item() / world)
    return losses


def dtensor_failures(mesh):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    rank, world = dist.get_rank(), dist.get_world_size()
    failures = []
    torch.manual_seed(5)
    full = torch.randn(2 * world + 1, 3 * world + 2)  # uneven: padding in every shard dimension

    def expect(name, dt, placement_check):
        local = dt.to_local()
        want = placement_check()
        if local.shape != want.shape or not torch.equal(local, want):
            failures.append("rank %d %s: local %s, want %s" % (rank, name, local, want))

    def my_chunk(t, dim):
        chunks = list(torch.chunk(t, world, dim=dim))
        return chunks[rank] if rank < len(chunks) else t.narrow(dim, 0, 0)

    d = distribute_tensor(full, mesh, [Shard(0)])
    expect("distribute Shard(0)", d, lambda: my_chunk(full, 0))
    r = d.redistribute(mesh, [Replicate()])
    expect("Shard(0) -> Replicate", r, lambda: full)
    s1 = r.redistribute(mesh, [Shard(1)])
    expect("Replicate -> Shard(1)", s1, lambda: my_chunk(full, 1))
    s0 = s1.redistribute(mesh, [Shard(0)])  # shard to shard: all_to_all
    expect("Shard(1) -> Shard(0)", s0, lambda: my_chunk(full, 0))
    expect("Shard(0) full_tensor", DTensor.from_local(s0.full_tensor(), mesh, [Replicate()]), lambda: full)
    for op in ("sum", "avg"):
        part = (full + rank) if op == "sum" else (full * (rank + 1))
        want = full * world + sum(range(world)) if op == "sum" else full * sum(range(1, world + 1)) / world
        p = DTensor.from_local(part, mesh, [Partial(op)])
        rep = p.redistribute(mesh, [Replicate()])
        if not torch.allclose(rep.to_local(), want, rtol=1e-6, atol=1e-6):
            failures.append("rank %d Partial(%s) -> Replicate: %s want %s" % (rank, op, rep.to_local(), want))
        sh = DTensor.from_local(part, mesh, [Partial(op)]).redistribute(mesh, [Shard(0)])
        if not torch.allclose(sh.to_local(), my_chunk(want, 0), rtol=1e-6, atol=1e-6):
            failures.append("rank %d Partial(%s) -> Shard(0): %s want %s" % (rank, op, sh.to_local(), my_chunk(want, 0)))
    return failures


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    from torch.distributed.device_mesh import DeviceMesh
    torch.set_num_threads(1)
    variant = os.environ.get("FSDP2_VARIANT", "fp32")
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    meshes = {"kolo": DeviceMesh.from_group(dist.group.WORLD, "cpu"), "gloo": DeviceMesh.from_group(gloo, "cpu")}
    groups = {"kolo": dist.group.WORLD, "gloo": gloo}
    data = torch.frombuffer(bytearray(open(train.__file__, "rb").read() * 4), dtype=torch.uint8).long()
    calls, reduce_ops = collections.Counter(), set()
    count_calls(calls, reduce_ops)
    out = {"losses": {}, "dtensor": {}}
    for name in ("kolo", "gloo"):
        out["losses"][name] = fsdp_losses(meshes[name], groups[name], variant, data)
        out["dtensor"][name] = dtensor_failures(meshes[name])
    out["calls"], out["reduce_ops"] = dict(calls), sorted(reduce_ops)
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()
