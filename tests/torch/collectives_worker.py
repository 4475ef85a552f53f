"""One rank of the collectives matrix (test_collectives.py): the default group is kolo, a gloo
group spans the same ranks, and every operation x dtype x reduce op runs on both. Each result is
checked against a reference computed here from every rank's input (each rank can rebuild any
rank's input), and against gloo's result wherever gloo supports the case. Writes
{"checks": N, "failures": [...]} to <out_dir>/<rank>.json."""
import datetime
import functools
import json
import os
import traceback

import torch
import torch.distributed as dist

INT_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOAT_TYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
MOVE_ONLY = [torch.bool, torch.int16, torch.complex64]  # kolo moves them, but does not reduce them
R = dist.ReduceOp


def make(rank, n, dtype, salt=0, lo=0, hi=4):
    """Rank `rank`'s input: small integers (exact in every dtype, sums and products included)."""
    v = (torch.arange(n, dtype=torch.int64) * 7 + rank * 13 + salt * 5) % (hi - lo + 1) + lo
    if dtype == torch.bool:
        return v % 2 == 1
    if dtype == torch.complex64:
        return torch.complex(v.float(), -v.float())
    return v.to(dtype)


def reduce_ref(xs, op, size):
    """The reference reduction of the list `xs` (one tensor per rank), in the inputs' dtype."""
    dt = xs[0].dtype
    w = [x.to(torch.float64) if dt.is_floating_point else x.to(torch.int64) for x in xs]
    if op == "sum":
        r = functools.reduce(torch.add, w)
    elif op == "prod":
        r = functools.reduce(torch.mul, w)
    elif op == "min":
        r = functools.reduce(torch.minimum, w)
    elif op == "max":
        r = functools.reduce(torch.maximum, w)
    elif op == "band":
        r = functools.reduce(torch.bitwise_and, w)
    elif op == "bor":
        r = functools.reduce(torch.bitwise_or, w)
    elif op == "bxor":
        r = functools.reduce(torch.bitwise_xor, w)
    elif op == "avg":
        r = functools.reduce(torch.add, w) / size
    elif op == "premul2":
        r = functools.reduce(torch.add, w) * 2.0
    return r.to(dt)


def torch_op(op):
    if op == "premul2":
        return dist._make_nccl_premul_sum(2.0)
    return {"sum": R.SUM, "prod": R.PRODUCT, "min": R.MIN, "max": R.MAX, "band": R.BAND, "bor": R.BOR,
            "bxor": R.BXOR, "avg": R.AVG}[op]


def ops_for(dtype):
    if dtype in INT_TYPES:
        return ["sum", "prod", "min", "max", "band", "bor", "bxor"]
    return ["sum", "prod", "min", "max", "avg", "premul2"]


class Checker:
    def __init__(self, rank, size, kolo, gloo):
        self.rank, self.size, self.kolo, self.gloo = rank, size, kolo, gloo
        self.checks, self.failures = 0, []

    def same(self, name, got, want, inexact=False):
        """got/want: tensors or lists of tensors."""
        got = got if isinstance(got, (list, tuple)) else [got]
        want = want if isinstance(want, (list, tuple)) else [want]
        self.checks += 1
        ok = len(got) == len(want)
        for g, w in zip(got, want):
            if not ok:
                break
            if g.dtype != w.dtype or g.shape != w.shape:
                ok = False
            elif inexact and g.dtype.is_floating_point:
                tol = 1e-2 if g.dtype in (torch.float16, torch.bfloat16) else 1e-6
                ok = torch.allclose(g.double(), w.double(), rtol=tol, atol=tol)
            else:
                ok = torch.equal(g, w)
        if not ok:
            self.failures.append("rank %d %s: got %s want %s" % (self.rank, name, got, want))

    def run(self, name, fn, ref, inexact=False, with_gloo=True):
        """fn(group) -> result; compared with ref() and, when gloo supports it, with gloo's result.
        with_gloo=False where gloo could refuse on some ranks only (a point-to-point peer would
        then wait forever for its partner)."""
        try:
            got = fn(self.kolo)
        except Exception as e:  # noqa: BLE001  a failure to report, not to stop the matrix
            self.checks += 1
            self.failures.append("rank %d %s: kolo raised %s" % (self.rank, name, traceback.format_exception_only(e)))
            return
        self.same(name + " vs reference", got, ref(), inexact)
        if self.gloo is None or not with_gloo:
            return
        try:
            theirs = fn(self.gloo)
        except RuntimeError:
            return  # gloo does not support this case (e.g. bfloat16, reduce_scatter, AVG)
        self.same(name + " vs gloo", got, theirs, inexact)


def matrix(c, subgroup_ranks=None):
    rank, size = c.rank, c.size
    n = 11  # odd: uneven splits for every algorithm
    for dt in INT_TYPES + FLOAT_TYPES:
        tag = str(dt).replace("torch.", "")
        for op in ops_for(dt):
            lo, hi = (1, 2) if op == "prod" else (0, 4)

            def ar(g, op=op, lo=lo, hi=hi):
                x = make(rank, n, dt, 1, lo, hi)
                dist.all_reduce(x, op=torch_op(op), group=g)
                return x
            c.run("all_reduce %s %s" % (op, tag), ar,
                  lambda op=op, lo=lo, hi=hi: reduce_ref([make(r, n, dt, 1, lo, hi) for r in range(size)], op, size),
                  inexact=op in ("avg", "premul2"))

        def ar_nc(g):  # non-contiguous: a transposed view
            x = make(rank, 12, dt, 2).view(3, 4).t()
            dist.all_reduce(x, group=g)
            return x.contiguous()
        c.run("all_reduce non-contiguous " + tag, ar_nc,
              lambda: reduce_ref([make(r, 12, dt, 2).view(3, 4).t() for r in range(size)], "sum", size))

        def ar_async(g):  # async_op: wait(), is_completed() and the future's value
            x = make(rank, n, dt, 3)
            w = dist.all_reduce(x, group=g, async_op=True)
            fut = w.get_future()
            w.wait()
            assert w.is_completed()
            return [x, fut.wait()[0]]
        c.run("all_reduce async " + tag, ar_async,
              lambda: [reduce_ref([make(r, n, dt, 3) for r in range(size)], "sum", size)] * 2)

        def arc(g):
            xs = [make(rank, 5, dt, 4), make(rank, 3, dt, 5).view(3, 1)]
            dist.all_reduce_coalesced(xs, group=g)
            return xs
        c.run("all_reduce_coalesced " + tag, arc, lambda: [
            reduce_ref([make(r, 5, dt, 4) for r in range(size)], "sum", size),
            reduce_ref([make(r, 3, dt, 5).view(3, 1) for r in range(size)], "sum", size)])

        for op in ("sum", "max"):
            root = size - 1

            def red(g, op=op):
                x = make(rank, n, dt, 6)
                dist.reduce(x, root, op=torch_op(op), group=g)
                return x if rank == root else torch.zeros(0, dtype=dt)
            c.run("reduce %s %s" % (op, tag), red, lambda op=op: reduce_ref(
                [make(r, n, dt, 6) for r in range(size)], op, size) if rank == size - 1 else torch.zeros(0, dtype=dt))

            def rs(g, op=op):
                out = torch.zeros(n, dtype=dt)
                dist.reduce_scatter(out, [make(rank, n, dt, 7 + j) for j in range(size)], op=torch_op(op), group=g)
                return out
            c.run("reduce_scatter %s %s" % (op, tag), rs, lambda op=op: reduce_ref(
                [make(r, n, dt, 7 + rank) for r in range(size)], op, size))

        def rst(g):
            out = torch.zeros(n, dtype=dt)
            dist.reduce_scatter_tensor(out, torch.cat([make(rank, n, dt, 7 + j) for j in range(size)]), group=g)
            return out
        c.run("reduce_scatter_tensor " + tag, rst,
              lambda: reduce_ref([make(r, n, dt, 7 + rank) for r in range(size)], "sum", size))

    for dt in INT_TYPES + FLOAT_TYPES + MOVE_ONLY:
        tag = str(dt).replace("torch.", "")
        root = 1 % size

        def bc(g):
            x = make(rank, 12, dt, 8).view(4, 3).t()  # non-contiguous
            dist.broadcast(x, root, group=g)
            return x.contiguous()
        c.run("broadcast " + tag, bc, lambda: make(root, 12, dt, 8).view(4, 3).t().contiguous())

        def ag(g):
            outs = [torch.zeros(n, dtype=dt) for _ in range(size)]
            dist.all_gather(outs, make(rank, n, dt, 9), group=g)
            return outs
        c.run("all_gather " + tag, ag, lambda: [make(r, n, dt, 9) for r in range(size)])

        def agt(g):
            out = torch.zeros(size * n, dtype=dt)
            dist.all_gather_into_tensor(out, make(rank, n, dt, 10), group=g)
            return out
        c.run("all_gather_into_tensor " + tag, agt, lambda: torch.cat([make(r, n, dt, 10) for r in range(size)]))

        def agc(g):
            outs = [[torch.zeros(3, dtype=dt), torch.zeros(2, 2, dtype=dt)] for _ in range(size)]
            dist.all_gather_coalesced(outs, [make(rank, 3, dt, 11), make(rank, 4, dt, 12).view(2, 2)], group=g)
            return [t for l in outs for t in l]
        c.run("all_gather_coalesced " + tag, agc,
              lambda: [t for r in range(size) for t in (make(r, 3, dt, 11), make(r, 4, dt, 12).view(2, 2))])

        def ga(g):
            outs = [torch.zeros(n, dtype=dt) for _ in range(size)] if rank == 0 else None
            dist.gather(make(rank, n, dt, 13), outs, dst=0, group=g)
            return outs if rank == 0 else []
        c.run("gather " + tag, ga, lambda: [make(r, n, dt, 13) for r in range(size)] if rank == 0 else [])

        def sc(g):
            out = torch.zeros(n, dtype=dt)
            src = size - 1
            ins = [make(src, n, dt, 14 + j) for j in range(size)] if rank == src else None
            dist.scatter(out, ins, src=src, group=g)
            return out
        c.run("scatter " + tag, sc, lambda: make(size - 1, n, dt, 14 + rank))

        def a2a_even(g):
            out = torch.zeros(size * 2, dtype=dt)
            dist.all_to_all_single(out, make(rank, size * 2, dt, 15), group=g)
            return out
        c.run("all_to_all_single even " + tag, a2a_even,
              lambda: torch.cat([make(r, size * 2, dt, 15)[rank * 2: rank * 2 + 2] for r in range(size)]))

        rows = lambda a, b: (a + 2 * b) % 3  # noqa: E731  rows rank a sends rank b (0 included)

        def a2a_uneven(g):
            ins = [rows(rank, j) for j in range(size)]
            outs = [rows(j, rank) for j in range(size)]
            x = make(rank, sum(ins) * 2, dt, 16).view(-1, 2)
            out = torch.zeros(sum(outs), 2, dtype=dt)
            dist.all_to_all_single(out, x, outs, ins, group=g)
            return out

        def a2a_uneven_ref():
            parts = []
            for r in range(size):
                ins = [rows(r, j) for j in range(size)]
                x = make(r, sum(ins) * 2, dt, 16).view(-1, 2)
                off = sum(ins[:rank])
                parts.append(x[off: off + ins[rank]])
            return torch.cat(parts)
        c.run("all_to_all_single uneven " + tag, a2a_uneven, a2a_uneven_ref)

        def a2a(g):
            outs = [torch.zeros(rows(j, rank) + 1, dtype=dt) for j in range(size)]
            dist.all_to_all(outs, [make(rank, rows(rank, j) + 1, dt, 17 + j) for j in range(size)], group=g)
            return outs
        c.run("all_to_all " + tag, a2a, lambda: [make(j, rows(j, rank) + 1, dt, 17 + rank) for j in range(size)])

    for dt in (torch.float32, torch.int64, torch.bool):
        tag = str(dt).replace("torch.", "")
        nxt, prv = (rank + 1) % size, (rank - 1) % size

        def ring(g):  # isend/irecv around the ring, irecv posted first on every rank
            out = torch.zeros(n, dtype=dt)
            r = dist.irecv(out, prv, group=g)
            s = dist.isend(make(rank, n, dt, 18), nxt, group=g)
            s.wait()
            r.wait()
            return out
        c.run("isend/irecv ring " + tag, ring, lambda: make(prv, n, dt, 18), with_gloo=dt != torch.bool)

        def batch(g):  # both neighbours at once, 1 MiB so that sends cannot all be buffered
            big = 1 << 18
            a, b = torch.zeros(big, dtype=dt), torch.zeros(big, dtype=dt)
            opsl = [dist.P2POp(dist.isend, make(rank, big, dt, 19), nxt, g),
                    dist.P2POp(dist.isend, make(rank, big, dt, 20), prv, g),
                    dist.P2POp(dist.irecv, a, prv, g), dist.P2POp(dist.irecv, b, nxt, g)]
            for w in dist.batch_isend_irecv(opsl):
                w.wait()
            return [a, b]
        c.run("batch_isend_irecv " + tag, batch, lambda: [make(prv, 1 << 18, dt, 19), make(nxt, 1 << 18, dt, 20)],
              with_gloo=dt != torch.bool)

        def sendrecv(g):  # blocking, with a tag, into a non-contiguous tensor
            if rank == 0:
                dist.send(make(0, 12, dt, 21), size - 1, group=g, tag=7)
                return torch.zeros(0, dtype=dt)
            if rank == size - 1:
                out = torch.zeros(4, 3, dtype=dt).t()  # kolo copies into a non-contiguous tensor
                if g is not c.kolo:
                    out = torch.zeros(3, 4, dtype=dt)  # gloo refuses one
                dist.recv(out, 0, group=g, tag=7)
                return out.contiguous().view(-1)
            return torch.zeros(0, dtype=dt)
        c.run("send/recv " + tag, sendrecv, lambda: make(0, 12, dt, 21)
              if rank == size - 1 else torch.zeros(0, dtype=dt), with_gloo=dt != torch.bool)

    def barrier(g):
        dist.barrier(group=g)
        return torch.ones(1)
    c.run("barrier", barrier, lambda: torch.ones(1))

    # Errors the backend refuses before any byte moves, as RuntimeError with kolo's message.
    for name, fn in [("all_reduce int16", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16), group=c.kolo)),
                     ("recv any source of an empty tensor", lambda: dist.recv(torch.zeros(0))),
                     ("bitwise op on float", lambda: dist.all_reduce(torch.zeros(3), op=R.BAND, group=c.kolo))]:
        c.checks += 1
        try:
            fn()
            c.failures.append("rank %d %s: no error" % (rank, name))
        except RuntimeError as e:
            if "kolo" not in str(e):
                c.failures.append("rank %d %s: error does not come from kolo: %s" % (rank, name, e))


def any_source(c):
    """dist.recv and dist.irecv without src, on kolo and on gloo with the same checks: every other
    rank sends the round's receiver (rank 0, the last rank, rank 1: senders below and above it)
    one tensor with one tag, in an order that changes from round to round, and the receiver's
    size - 1 receives must name every sender exactly once (dist.recv's return value, irecv's
    work.source_rank()), each with that sender's data."""
    import time
    rank, size = c.rank, c.size
    if size < 2:
        return
    for rnd, (receiver, use_irecv) in enumerate(((0, False), (size - 1, True), (1, False))):
        for backend, g in (("kolo", c.kolo), ("gloo", c.gloo)):
            name = "rank %d %s any source on %s, round %d" % (rank, "irecv" if use_irecv else "recv", backend, rnd)
            tag = 5 + rnd
            if rank != receiver:
                time.sleep(0.03 * ((rank + rnd) % size))
                dist.send(make(rank, 6, torch.float32, 40 + rnd), receiver, group=g, tag=tag)
            else:
                sources = []
                for _ in range(size - 1):
                    c.checks += 1
                    t = torch.full((6,), -1.0)
                    if use_irecv:
                        w = dist.irecv(t, group=g, tag=tag)
                        w.wait()
                        src = w.source_rank()
                    else:
                        src = dist.recv(t, group=g, tag=tag)
                    sources.append(src)
                    if not 0 <= src < size or src == receiver:
                        c.failures.append("%s: source rank %s" % (name, src))
                    elif not torch.equal(t, make(src, 6, torch.float32, 40 + rnd)):
                        c.failures.append("%s: the tensor from rank %d holds %s" % (name, src, t))
                c.checks += 1
                if sorted(sources) != [r for r in range(size) if r != receiver]:
                    c.failures.append("%s: sources %s, not every other rank once" % (name, sources))
            dist.barrier(group=g)


def subgroups(c):
    """new_group over a subset, for kolo and gloo alike, with the same checks."""
    size, rank = c.size, c.rank
    members = [0, size - 1] if size > 2 else [1]
    kolo_sub = dist.new_group(members, backend="kolo")
    gloo_sub = dist.new_group(members, backend="gloo")
    if rank not in members:
        return
    sub = Checker(members.index(rank), len(members), kolo_sub, gloo_sub)
    me, sz = sub.rank, sub.size
    for dt in (torch.float32, torch.int64):
        def ar(g):
            x = make(me, 9, dt, 30)
            dist.all_reduce(x, group=g)
            return x
        sub.run("subgroup all_reduce", ar, lambda: reduce_ref([make(r, 9, dt, 30) for r in range(sz)], "sum", sz))

        def bc(g):
            x = make(me, 9, dt, 31)
            dist.broadcast(x, members[-1], group=g)  # root named by its global rank
            return x
        sub.run("subgroup broadcast", bc, lambda: make(sz - 1, 9, dt, 31))

        def ag(g):
            outs = [torch.zeros(9, dtype=dt) for _ in range(sz)]
            dist.all_gather(outs, make(me, 9, dt, 32), group=g)
            return outs
        sub.run("subgroup all_gather", ag, lambda: [make(r, 9, dt, 32) for r in range(sz)])
    c.checks += sub.checks
    c.failures += sub.failures


def sparse(c):
    """all_reduce of sparse COO tensors (SUM, as gloo supports it): overlapping and disjoint
    indices, a dense dimension, a rank with no entries; compared with the dense sum and with
    gloo's result (its values, indices and sizes once coalesced)."""
    rank, size = c.rank, c.size

    def make_sparse(r, case):
        if case == "empty" and r == 0:
            return torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(0, 3), (10, 3))
        rows = torch.tensor([[(r * 3 + k * 2) % 10 for k in range(r + 2)]])  # repeats across ranks
        vals = torch.arange((r + 2) * 3, dtype=torch.float32).view(-1, 3) + r
        return torch.sparse_coo_tensor(rows, vals, (10, 3))

    for case in ("overlap", "empty"):
        def ar(g, case=case):
            x = make_sparse(rank, case)
            dist.all_reduce(x, group=g)
            assert x.is_sparse
            x = x.coalesce()
            return [x.indices(), x.values()]

        def ref(case=case):
            want = functools.reduce(torch.add, [make_sparse(r, case).to_dense() for r in range(size)])
            s = want.to_sparse(1).coalesce()
            return [s.indices(), s.values()]
        c.run("sparse all_reduce " + case, ar, ref)
    c.checks += 1
    try:
        dist.all_reduce(make_sparse(rank, "overlap"), op=R.MAX, group=c.kolo)
        c.failures.append("rank %d sparse all_reduce MAX: no error" % rank)
    except RuntimeError as e:
        if "kolo" not in str(e):
            c.failures.append("rank %d sparse all_reduce MAX: error not from kolo: %s" % (rank, e))


def objects(c):
    """The object collectives (pickled through tensors by torch) on kolo and on gloo: each result
    compared with the reference and with gloo's."""
    rank, size = c.rank, c.size

    def obj(r):
        return {"rank": r, "name": "r" * (r + 1), "list": list(range(r * 5)), "t": (r, 1.5 * r)}

    def run(name, fn, ref):
        for backend, g in (("kolo", c.kolo), ("gloo", c.gloo)):
            c.checks += 1
            try:
                got = fn(g)
            except Exception as e:  # noqa: BLE001
                c.failures.append("rank %d %s on %s raised %s" % (rank, name, backend, e))
                continue
            if got != ref():
                c.failures.append("rank %d %s on %s: got %r want %r" % (rank, name, backend, got, ref()))

    root = size - 1

    def bol(g):
        objs = [obj(root), "x" * 1000, None] if rank == root else [None, None, None]
        dist.broadcast_object_list(objs, src=root, group=g)
        return objs
    run("broadcast_object_list", bol, lambda: [obj(root), "x" * 1000, None])

    def ago(g):
        out = [None] * size
        dist.all_gather_object(out, obj(rank), group=g)
        return out
    run("all_gather_object", ago, lambda: [obj(r) for r in range(size)])

    def gao(g):
        out = [None] * size if rank == 0 else None
        dist.gather_object(obj(rank), out, dst=0, group=g)
        return out
    run("gather_object", gao, lambda: [obj(r) for r in range(size)] if rank == 0 else None)

    def sol(g):
        out = [None]
        dist.scatter_object_list(out, [obj(10 + r) for r in range(size)] if rank == root else None, src=root, group=g)
        return out
    run("scatter_object_list", sol, lambda: [obj(10 + rank)])


def names(c):
    """The backend's name wherever torch shows it. torch 1.13: the group is kolo's own object, so
    every place says "kolo", DDP's logging data included. torch 2.x: the group is torch's
    ProcessGroup, which names any plugin "custom" (ProcessGroup::getBackendName() returns its
    BackendType's name, and a plugin gets BackendType.CUSTOM: nothing a plugin can change), while
    dist.get_backend() and the per-device backend object say "kolo"."""
    import torch.nn as nn
    torch2 = hasattr(c.kolo, "_get_backend")
    shown = {"dist.get_backend": dist.get_backend(c.kolo), "group.name": c.kolo.name()}
    if torch2:
        shown["backend.name"] = c.kolo._get_backend(torch.device("cpu")).name()
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(2, 2), process_group=c.kolo)
    shown["ddp logging backend_name"] = ddp._get_ddp_logging_data().get("backend_name")
    want = {k: "kolo" for k in shown}
    if torch2:
        want["group.name"] = want["ddp logging backend_name"] = "custom"
    c.checks += 1
    if shown != want:
        c.failures.append("rank %d backend names: %s, expected %s" % (c.rank, shown, want))


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    if init_method == "env://":
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(size)
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    assert dist.get_backend() == "kolo"
    c = Checker(rank, size, dist.group.WORLD, dist.new_group(backend="gloo"))
    try:
        matrix(c)
        sparse(c)
        objects(c)
        names(c)
        subgroups(c)
        any_source(c)
    except Exception:  # noqa: BLE001
        c.failures.append("rank %d: %s" % (rank, traceback.format_exc()))
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"checks": c.checks, "failures": c.failures}, f)
    dist.barrier()
    dist.destroy_process_group()
