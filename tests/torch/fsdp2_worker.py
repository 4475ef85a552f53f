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
 "coalesced": [kolo failures], "calls": {name: count}, "reduce_ops": [...]}.

- The coalesced forms, AVG, PREMUL_SUM and all_to_all_single directly (coalesced_failures), on
  kolo only (gloo has no PREMUL_SUM), against references: FSDP2 on a CPU mesh reaches the
  single-tensor forms with AVG, and DTensor on a CPU mesh turns shard-to-shard into an
  all-gather (torch: "CPU process group does not support alltoall yet")."""
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


def count_calls(calls, reduce_ops, gloo):
    """Wraps the torch.distributed functions FSDP2 and DTensor reach, to count them. On `gloo`,
    an all-gather of 16-bit floats moves their bytes as uint8: Debian's torch 2.x
    gloo refuses bfloat16, float16 and int16 ("Invalid scalar type"); kolo moves any dtype."""
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
            if (_name in ("all_gather_single", "all_gather_into_tensor") and kw.get("group") is gloo
                    and a[0].dtype in (torch.bfloat16, torch.float16)):
                a = (a[0].view(torch.uint8), a[1].view(torch.uint8)) + tuple(a[2:])
            try:
                return _fn(*a, **kw)
            except RuntimeError as e:
                raise RuntimeError("%s on %s, dtypes %s: %s" % (_name, dist.get_backend(kw.get("group")),
                                   [t.dtype for t in a[:2] if isinstance(t, torch.Tensor)], e)) from e
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


def coalesced_failures(group):
    """What FSDP2 and DTensor may call beyond the above, each checked against a reference built
    from every rank's input: all_gather_into_tensor and reduce_scatter_tensor coalesced (torch's
    _coalescing_manager: the backend's allgather_into_tensor_coalesced and
    reduce_scatter_tensor_coalesced) with SUM, AVG and PREMUL_SUM, mixed dtypes (float32,
    bfloat16, int64) in one list, and all_to_all_single with uneven splits."""
    rank, world = dist.get_rank(), dist.get_world_size()
    failures = []

    def inp(r, n, dtype, salt):
        return ((torch.arange(n) * 3 + r * 7 + salt) % 5).to(dtype)

    specs = [(5, torch.float32), (3, torch.bfloat16), (4, torch.int64)]
    outs = [torch.zeros(n * world, dtype=dt) for n, dt in specs]
    with dist._coalescing_manager(group=group, async_ops=True) as cm:
        for i, (n, dt) in enumerate(specs):
            dist.all_gather_into_tensor(outs[i], inp(rank, n, dt, i), group=group)
    cm.wait()
    for i, (n, dt) in enumerate(specs):
        want = torch.cat([inp(r, n, dt, i) for r in range(world)])
        if not torch.equal(outs[i], want):
            failures.append("rank %d all_gather_into_tensor coalesced %s: %s want %s" % (rank, dt, outs[i], want))
    for opname, op, scale in (("sum", dist.ReduceOp.SUM, 1.0), ("avg", dist.ReduceOp.AVG, 1.0 / world),
                              ("premul_sum(0.5)", dist._make_nccl_premul_sum(0.5), 0.5)):
        fspecs = [(5, torch.float32), (3, torch.bfloat16)]
        outs = [torch.zeros(n, dtype=dt) for n, dt in fspecs]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for i, (n, dt) in enumerate(fspecs):
                dist.reduce_scatter_tensor(outs[i], inp(rank, n * world, dt, 10 + i), op=op, group=group)
        cm.wait()
        for i, (n, dt) in enumerate(fspecs):
            total = sum(inp(r, n * world, dt, 10 + i).double() for r in range(world))
            want = (total * scale)[rank * n: (rank + 1) * n]
            if not torch.allclose(outs[i].double(), want, rtol=1e-2, atol=1e-2):
                failures.append("rank %d reduce_scatter_tensor coalesced %s %s: %s want %s"
                                % (rank, opname, dt, outs[i], want))
    rows = lambda a, b: (a + 2 * b) % 3 + 1  # noqa: E731  rows rank a sends rank b
    x = torch.cat([torch.full((rows(rank, j), 2), float(rank * 10 + j)) for j in range(world)])
    out = torch.zeros(sum(rows(j, rank) for j in range(world)), 2)
    dist.all_to_all_single(out, x, [rows(j, rank) for j in range(world)], [rows(rank, j) for j in range(world)],
                           group=group)
    want = torch.cat([torch.full((rows(j, rank), 2), float(j * 10 + rank)) for j in range(world)])
    if not torch.equal(out, want):
        failures.append("rank %d all_to_all_single uneven: %s want %s" % (rank, out, want))
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
    count_calls(calls, reduce_ops, gloo)
    out = {"losses": {}, "dtensor": {}, "coalesced": coalesced_failures(dist.group.WORLD)}
    for name in ("kolo", "gloo"):
        out["losses"][name] = fsdp_losses(meshes[name], groups[name], variant, data)
        out["dtensor"][name] = dtensor_failures(meshes[name])
    out["calls"], out["reduce_ops"] = dict(calls), sorted(reduce_ops)
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()
