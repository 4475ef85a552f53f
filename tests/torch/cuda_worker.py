"""One rank of test_cuda.py: kolo on CUDA tensors, every rank on the same GPU (cuda:0 unless
KOLO_TEST_GPUS > 1). Each result is copied to the host and checked element by element against a
reference computed here (collectives_worker's inputs: each rank can rebuild any rank's input).
Covers the collectives and point-to-point on device buffers, the stream semantics of c10d's Work
(async_op=True, wait() and then using the tensor on the current stream, a producer still
running on the stream when the operation is issued, a non-default current stream, the future and
then(), synchronize()/is_completed()) and the refusal of host and device tensors in one operation.
Writes {"checks": N, "failures": [...]} to <out_dir>/<rank>.json."""
import datetime
import faulthandler
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

from collectives_worker import Checker, make, reduce_ref, torch_op

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.int8,
          torch.uint8]
BIG_DTYPES = [torch.float32, torch.bfloat16, torch.int64]
# Sleeping on the GPU before an input is written: an operation that did not wait for the work
# queued on the current stream would read the stale contents (zeros).
SLEEP_CYCLES = 20_000_000  # ~10 ms


def device(rank):
    gpus = int(os.environ.get("KOLO_TEST_GPUS", "1"))
    return torch.device("cuda", 0 if gpus <= 1 else rank % gpus)


class CudaChecker(Checker):
    """Checker whose results come from the GPU: copied to the host (on the current stream, which
    the operations' wait() made wait for them) before the comparison. No gloo comparison."""

    def run(self, name, fn, ref, inexact=False, with_gloo=False):
        # Each case named as it starts: a rank that hangs shows where (device-check runs -s).
        print("rank %d: %s" % (self.rank, name), file=sys.stderr, flush=True)
        try:
            got = fn(self.kolo)
            got = [t.cpu() for t in got] if isinstance(got, (list, tuple)) else got.cpu()
        except Exception as e:  # noqa: BLE001  a failure to report, not to stop the checks
            self.checks += 1
            self.failures.append("rank %d %s: kolo raised %s" % (self.rank, name, traceback.format_exception_only(e)))
            return
        self.same(name, got, ref(), inexact)


def collectives(c, dev, n, dtypes):
    rank, size = c.rank, c.size
    cu = lambda t: t.to(dev)  # noqa: E731
    for dt in dtypes:
        tag = "%s n=%d" % (str(dt).replace("torch.", ""), n)
        ops = ["sum", "max", "min"] + (["avg", "premul2"] if dt.is_floating_point else ["bxor"])
        for op in ops:
            def ar(g, op=op):
                x = cu(make(rank, n, dt, 1))
                dist.all_reduce(x, op=torch_op(op), group=g)
                return x
            c.run("all_reduce %s %s" % (op, tag), ar,
                  lambda op=op: reduce_ref([make(r, n, dt, 1) for r in range(size)], op, size),
                  inexact=op in ("avg", "premul2"))

        def ar_nc(g):  # non-contiguous: staged, copied back by the finish step on the GPU
            x = cu(make(rank, 2 * n, dt, 2)).view(2, n).t()
            dist.all_reduce(x, group=g)
            return x.contiguous()
        c.run("all_reduce non-contiguous " + tag, ar_nc,
              lambda: reduce_ref([make(r, 2 * n, dt, 2).view(2, n).t() for r in range(size)], "sum", size))

        root = 1 % size

        def bc(g):
            x = cu(make(rank, n, dt, 3))
            dist.broadcast(x, root, group=g)
            return x
        c.run("broadcast " + tag, bc, lambda: make(root, n, dt, 3))

        def red(g):
            x = cu(make(rank, n, dt, 4))
            dist.reduce(x, size - 1, group=g)
            return x if rank == size - 1 else x.new_zeros(0)
        c.run("reduce " + tag, red, lambda: reduce_ref([make(r, n, dt, 4) for r in range(size)], "sum", size)
              if rank == size - 1 else torch.zeros(0, dtype=dt))

        def ag(g):
            outs = [torch.zeros(n, dtype=dt, device=dev) for _ in range(size)]
            dist.all_gather(outs, cu(make(rank, n, dt, 5)), group=g)
            return outs
        c.run("all_gather " + tag, ag, lambda: [make(r, n, dt, 5) for r in range(size)])

        def agt(g):
            out = torch.zeros(size * n, dtype=dt, device=dev)
            dist.all_gather_into_tensor(out, cu(make(rank, n, dt, 6)), group=g)
            return out
        c.run("all_gather_into_tensor " + tag, agt, lambda: torch.cat([make(r, n, dt, 6) for r in range(size)]))

        def rs(g):
            out = torch.zeros(n, dtype=dt, device=dev)
            dist.reduce_scatter(out, [cu(make(rank, n, dt, 7 + j)) for j in range(size)], group=g)
            return out
        c.run("reduce_scatter " + tag, rs, lambda: reduce_ref([make(r, n, dt, 7 + rank) for r in range(size)],
                                                              "sum", size))

        def rst(g):
            out = torch.zeros(n, dtype=dt, device=dev)
            dist.reduce_scatter_tensor(out, cu(torch.cat([make(rank, n, dt, 9 + j) for j in range(size)])), group=g)
            return out
        c.run("reduce_scatter_tensor " + tag, rst,
              lambda: reduce_ref([make(r, n, dt, 9 + rank) for r in range(size)], "sum", size))

        def ga(g):
            outs = [torch.zeros(n, dtype=dt, device=dev) for _ in range(size)] if rank == 0 else None
            dist.gather(cu(make(rank, n, dt, 11)), outs, dst=0, group=g)
            return outs if rank == 0 else []
        c.run("gather " + tag, ga, lambda: [make(r, n, dt, 11) for r in range(size)] if rank == 0 else [])

        def sc(g):
            out = torch.zeros(n, dtype=dt, device=dev)
            src = size - 1
            ins = [cu(make(src, n, dt, 12 + j)) for j in range(size)] if rank == src else None
            dist.scatter(out, ins, src=src, group=g)
            return out
        c.run("scatter " + tag, sc, lambda: make(size - 1, n, dt, 12 + rank))

        def a2a(g):
            out = torch.zeros(size * n, dtype=dt, device=dev)
            dist.all_to_all_single(out, cu(make(rank, size * n, dt, 13)), group=g)
            return out
        c.run("all_to_all_single " + tag, a2a,
              lambda: torch.cat([make(r, size * n, dt, 13)[rank * n: (rank + 1) * n] for r in range(size)]))

        rows = lambda a, b: (a + 2 * b) % 3 + 1  # noqa: E731  rows rank a sends rank b

        def a2av(g):
            ins = [rows(rank, j) for j in range(size)]
            outs = [rows(j, rank) for j in range(size)]
            out = torch.zeros(sum(outs), 2, dtype=dt, device=dev)
            dist.all_to_all_single(out, cu(make(rank, sum(ins) * 2, dt, 14).view(-1, 2)), outs, ins, group=g)
            return out

        def a2av_ref():
            parts = []
            for r in range(size):
                ins = [rows(r, j) for j in range(size)]
                x = make(r, sum(ins) * 2, dt, 14).view(-1, 2)
                off = sum(ins[:rank])
                parts.append(x[off: off + ins[rank]])
            return torch.cat(parts)
        c.run("all_to_all_single uneven " + tag, a2av, a2av_ref)

        def a2al(g):
            outs = [torch.zeros(rows(j, rank), dtype=dt, device=dev) for j in range(size)]
            dist.all_to_all(outs, [cu(make(rank, rows(rank, j), dt, 15 + j)) for j in range(size)], group=g)
            return outs
        c.run("all_to_all " + tag, a2al, lambda: [make(j, rows(j, rank), dt, 15 + rank) for j in range(size)])

        nxt, prv = (rank + 1) % size, (rank - 1) % size

        def ring(g):
            out = torch.zeros(n, dtype=dt, device=dev)
            r = dist.irecv(out, prv, group=g)
            s = dist.isend(cu(make(rank, n, dt, 16)), nxt, group=g)
            s.wait()
            r.wait()
            return out
        c.run("isend/irecv ring " + tag, ring, lambda: make(prv, n, dt, 16))

        def sendrecv(g):
            if rank == 0:
                dist.send(cu(make(0, n, dt, 17)), size - 1, group=g, tag=3)
            elif rank == size - 1:
                out = torch.zeros(n, dtype=dt, device=dev)
                dist.recv(out, 0, group=g, tag=3)
                return out
            return torch.zeros(0, dtype=dt, device=dev)
        c.run("send/recv " + tag, sendrecv,
              lambda: make(0, n, dt, 17) if rank == size - 1 else torch.zeros(0, dtype=dt))


def streams(c, dev):
    """c10d's stream semantics on kolo's device operations."""
    rank, size = c.rank, c.size
    n = 1 << 20
    want = lambda salt: reduce_ref([make(r, n, torch.float32, salt) for r in range(size)], "sum", size)  # noqa: E731

    def produced_late(salt):
        # The input is written on the current stream behind a GPU sleep: still being produced
        # when the collective is issued.
        host = make(rank, n, torch.float32, salt).pin_memory()
        x = torch.zeros(n, device=dev)
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(host, non_blocking=True)
        return x

    def async_wait(g):  # async_op=True, wait(), then the tensor used on the current stream
        x = produced_late(20)
        w = dist.all_reduce(x, group=g, async_op=True)
        w.wait()
        return x * 2
    c.run("async all_reduce, wait, use on the current stream", async_wait, lambda: want(20) * 2)

    def side_stream(g):  # issued on a non-default stream: ordered there, waited there
        s = torch.cuda.Stream(device=dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            x = produced_late(21)
            w = dist.all_reduce(x, group=g, async_op=True)
            w.wait()
            y = x + 1
        torch.cuda.current_stream(dev).wait_stream(s)
        return y
    c.run("all_reduce issued on a side stream", side_stream, lambda: want(21) + 1)

    def future(g):  # the future's value, and then(): ordered after the GPU copies
        x = produced_late(22)
        w = dist.all_reduce(x, group=g, async_op=True)
        fut = w.get_future()
        doubled = fut.then(lambda f: f.value()[0] * 2)
        v = fut.wait()[0]
        d = doubled.wait()
        return [v.clone(), d]
    c.run("all_reduce future and then()", future, lambda: [want(22), want(22) * 2])

    def future_staged(g):  # a non-contiguous result: the finish step's copy, then the future
        x = torch.zeros(n, device=dev).view(2, n // 2).t()
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(make(rank, n, torch.float32, 23).view(2, n // 2).t().to(dev))
        w = dist.all_reduce(x, group=g, async_op=True)
        v = w.get_future().wait()[0]
        return v.contiguous()
    c.run("all_reduce non-contiguous future", future_staged,
          lambda: reduce_ref([make(r, n, torch.float32, 23).view(2, n // 2).t() for r in range(size)], "sum",
                             size).contiguous())

    def staged_wait(g):  # a non-contiguous result through wait()
        x = torch.zeros(n, device=dev).view(2, n // 2).t()
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(make(rank, n, torch.float32, 24).view(2, n // 2).t().to(dev))
        w = dist.all_reduce(x, group=g, async_op=True)
        w.wait()
        return (x + 0).contiguous()
    c.run("all_reduce non-contiguous wait", staged_wait,
          lambda: reduce_ref([make(r, n, torch.float32, 24).view(2, n // 2).t() for r in range(size)], "sum",
                             size).contiguous())

    def sync(g):  # synchronize(): the host waits until the result is in device memory
        x = produced_late(25)
        w = dist.all_reduce(x, group=g, async_op=True)
        w.synchronize()
        if not w.is_completed():
            raise AssertionError("is_completed() is False after synchronize()")
        return x
    c.run("all_reduce synchronize, is_completed", sync, lambda: want(25))

    def poll(g):  # is_completed() turns True by itself
        x = produced_late(26)
        w = dist.all_reduce(x, group=g, async_op=True)
        deadline = time.monotonic() + 60
        while not w.is_completed():
            if time.monotonic() > deadline:
                raise AssertionError("is_completed() still False after 60 s")
            time.sleep(0.001)
        w.wait()
        return x
    c.run("all_reduce is_completed polling", poll, lambda: want(26))

    def many(g):  # many operations in flight on one stream, then one wait each
        xs = [produced_late(30 + i) for i in range(4)]
        ws = [dist.all_reduce(x, group=g, async_op=True) for x in xs]
        for w in ws:
            w.wait()
        return [x - 1 for x in xs]
    c.run("4 all_reduces in flight", many, lambda: [want(30 + i) - 1 for i in range(4)])

    def barrier(g):
        dist.barrier(group=g)
        return torch.ones(1, device=dev)
    c.run("barrier", barrier, lambda: torch.ones(1))


def refusals(c, dev):
    """Host and device tensors in one operation: refused before any byte moves, with kolo's message."""
    rank, size = c.rank, c.size
    cases = [
        ("all_gather cpu outputs, cuda input",
         lambda: dist.all_gather([torch.zeros(4) for _ in range(size)], torch.ones(4, device=dev))),
        ("all_gather cuda outputs, cpu input",
         lambda: dist.all_gather([torch.zeros(4, device=dev) for _ in range(size)], torch.ones(4))),
        ("all_to_all_single cpu output, cuda input",
         lambda: dist.all_to_all_single(torch.zeros(2 * size), torch.ones(2 * size, device=dev))),
        ("all_to_all mixed",
         lambda: dist.all_to_all([torch.zeros(2, device=dev) for _ in range(size)], [torch.ones(2)] * size)),
        ("reduce_scatter_tensor mixed",
         lambda: dist.reduce_scatter_tensor(torch.zeros(2, device=dev), torch.ones(2 * size))),
    ]
    for name, fn in cases:
        c.checks += 1
        try:
            fn()
            torch.cuda.synchronize(dev)
            c.failures.append("rank %d %s: no error" % (rank, name))
        except RuntimeError as e:
            msg = str(e)
            if "kolo" not in msg or "one device" not in msg:
                c.failures.append("rank %d %s: not kolo's refusal of mixed devices: %s" % (rank, name, msg[:300]))
    dist.barrier()


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    # Python stacks of a rank still running near the test's timeout (launch(..., timeout=90)).
    faulthandler.dump_traceback_later(80, exit=False)
    dev = device(rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    c = CudaChecker(rank, size, dist.group.WORLD, None)
    try:
        for n, dtypes in ((1, DTYPES), (1001, DTYPES), ((1 << 20) + 3, BIG_DTYPES)):  # up to 4+ MiB
            collectives(c, dev, n, dtypes)
        streams(c, dev)
        refusals(c, dev)
    except Exception:  # noqa: BLE001
        c.failures.append("rank %d: %s" % (rank, traceback.format_exc()))
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"checks": c.checks, "failures": c.failures}, f)
    dist.barrier()
    dist.destroy_process_group()
