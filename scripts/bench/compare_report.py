#!/usr/bin/env python3
"""Turns compare.sh's raw benchmark logs into a CSV of medians and a Markdown ratio table.

Every log holds nccl-tests' table (kolo-perf, kolo-perf-mpi or kolo-perf-gloo) and is named
r<rep>_<collective>_n<ranks>_<impl>_<band>.txt. For each (collective, ranks, size, impl) the
median time over the repetitions is kept; busbw is recomputed from it with nccl-tests' factor
(the logs round busbw to 0.01 GB/s, which is 0.00 for small sizes). A ratio kolo/peer is
kolo's busbw over the peer's, which is the peer's time over kolo's: > 1 means kolo is faster.

With --limits (compare.sh's limits.json: memcpy/reduction bandwidth from kolo-bench-limits and
loopback TCP throughput from iperf3) every row also gets the bound its transport implies and its
busbw as a percentage of it (see bound_gbs). --json writes every row, the limits and the
ratios; --plots writes PNG charts with gnuplot (compare_plots.py).
"""
import json
import argparse
import csv
import math
import os
import re
import statistics
import sys
from collections import defaultdict

LOG_NAME = re.compile(
    r"^r(\d+)_(allreduce|broadcast|reduce|allgather|reducescatter|alltoall|gather|scatter|sendrecv)_n(\d+)_(.+)_"
    r"(small|medium|large|huge)\.txt$")


def busbw_factor(collective, n):
    """nccl-tests' bus bandwidth factors (its doc/PERFORMANCE.md)."""
    if collective == "allreduce":
        return 2.0 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def impl_transport(impl, kolo_transport):
    """The transport an implementation's bytes take between ranks on this one host."""
    if impl == "kolo":
        return kolo_transport or "auto"
    if impl == "mpi":
        return "shm"
    return "tcp"  # mpi-tcp and Gloo's TCP transport


def bound_gbs(transport, ranks, limits):
    """The busbw no algorithm can beat on this machine, by nccl-tests' busbw definition (bytes
    each rank's link carries): over TCP the loopback link's throughput (iperf3, one stream); over
    shared memory the memcpy bandwidth, as every bus byte is copied at least once. Ranks beyond
    the core count share cores, so the single-core rate is scaled by min(1, cores / ranks).
    None when the limit was not measured."""
    if not limits:
        return None
    share = min(1.0, limits.get("cores", 1) / ranks)
    if transport == "tcp":
        link = limits.get("tcp_loopback_gbs")
    else:  # shm, and "auto", which is shm between ranks on one host
        link = limits.get("memcpy_1_gbs")
    return link * share if link else None


def parse_rows(path, placement):
    """(size, time_us, wrong) per complete table row; wrong is None when not checked."""
    time_field, wrong_field = (9, 12) if placement == "in" else (5, 8)
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if len(fields) != 13 or line.startswith("#") or not fields[0].isdigit():
                continue
            try:
                time_us = float(fields[time_field])
            except ValueError:
                continue
            wrong = None if fields[wrong_field] == "N/A" else int(float(fields[wrong_field]))
            rows.append((int(fields[0]), time_us, wrong))
    return rows


def load_before(path):
    """The 1-minute load average compare.sh wrote at the top of a log, or None."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("# loadavg before:"):
                return float(line.split(":", 1)[1].split()[0])
            if not line.startswith("#"):
                break
    return None


def human_size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


PREFERRED_ORDER = ["kolo", "mpi", "mpi-tcp", "gloo-ring", "gloo-ring_chunked", "gloo-halving_doubling"]


def impl_key(impl):
    """kolo first, then the peers in a stable, readable order."""
    return (PREFERRED_ORDER.index(impl) if impl in PREFERRED_ORDER else len(PREFERRED_ORDER), impl)


def impl_order(impls):
    return sorted(impls, key=impl_key)


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True, help="directory of compare.sh's logs")
    ap.add_argument("--placement", choices=("in", "out"), default="in")
    ap.add_argument("--csv", required=True, help="CSV to write")
    ap.add_argument("--meta", help="compare.sh's meta.txt, printed above the tables")
    ap.add_argument("--json", help="JSON to write: every row, the limits and the ratios")
    ap.add_argument("--limits", help="compare.sh's limits.json (physical bounds)")
    ap.add_argument("--transport", default="", help="kolo's KOLO_TRANSPORT in these runs (empty: auto)")
    ap.add_argument("--plots", help="directory for PNG charts (needs gnuplot)")
    args = ap.parse_args()
    limits = None
    if args.limits and os.path.exists(args.limits):
        with open(args.limits) as f:
            limits = json.load(f)

    times = defaultdict(list)  # (collective, ranks, size, impl) -> [time_us per repetition]
    wrong_total = defaultdict(int)
    loads = []
    for name in sorted(os.listdir(args.raw)):
        m = LOG_NAME.match(name)
        if not m:
            continue
        load = load_before(os.path.join(args.raw, name))
        if load is not None:
            loads.append(load)
        _, collective, ranks, impl, _ = m.groups()
        for size, time_us, wrong in parse_rows(os.path.join(args.raw, name), args.placement):
            key = (collective, int(ranks), size, impl)
            times[key].append(time_us)
            if wrong:
                wrong_total[key] += wrong
    if not times:
        print(f"compare_report.py: no table rows in {args.raw}", file=sys.stderr)
        return 1

    medians = {}
    for key in times:
        collective, ranks, size, impl = key
        t = statistics.median(times[key])
        medians[key] = (t, size / t / 1e3 * busbw_factor(collective, ranks) if t > 0 else 0.0)
    records = []
    for key in sorted(times, key=lambda k: (k[0], k[1], k[2], impl_key(k[3]))):
        collective, ranks, size, impl = key
        t, bw = medians[key]
        transport = impl_transport(impl, args.transport)
        bound = bound_gbs(transport, ranks, limits)
        kolo = medians.get((collective, ranks, size, "kolo"))
        # kolo's speed-up over this implementation (its median time over kolo's); None for kolo.
        ratio = t / kolo[0] if impl != "kolo" and kolo and kolo[0] > 0 else None
        records.append({
            "collective": collective, "ranks": ranks, "size_bytes": size, "impl": impl, "transport": transport,
            "placement": args.placement, "median_time_us": round(t, 3), "busbw_gbs": round(bw, 4),
            "repetitions": len(times[key]), "wrong": wrong_total[key],
            "kolo_speedup": round(ratio, 3) if ratio is not None else None,
            "bound_gbs": round(bound, 3) if bound else None,
            "pct_of_bound": round(100.0 * bw / bound, 1) if bound else None,
        })
    fields = ["collective", "ranks", "size_bytes", "impl", "transport", "placement", "median_time_us", "busbw_gbs",
              "repetitions", "wrong", "kolo_speedup", "bound_gbs", "pct_of_bound"]
    with open(args.csv, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(fields)
        for r in records:
            out.writerow(["" if r[k] is None else r[k] for k in fields])
    if args.json:
        meta = open(args.meta).read() if args.meta and os.path.exists(args.meta) else ""
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "limits": limits, "kolo_transport": args.transport or "auto", "rows": records},
                      f, indent=1)
    if args.plots:
        import compare_plots
        compare_plots.write_plots(records, args.plots, args.transport or "auto")

    if args.meta and os.path.exists(args.meta):
        with open(args.meta) as f:
            print("```")
            print(f.read().rstrip())
            print("```")
            print()
    if limits:
        print("Physical limits on this machine: " + ", ".join(f"{k} {v}" for k, v in limits.items()) + ".")
        print()
    if loads:
        print(f"1-minute load average before each of the {len(loads)} runs (the benchmark's own ranks included): "
              f"min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}.")
        print()
    column = "in-place" if args.placement == "in" else "out-of-place"
    for collective, ranks in sorted({(k[0], k[1]) for k in medians}):
        impls = impl_order({k[3] for k in medians if k[0] == collective and k[1] == ranks})
        peers = [i for i in impls if i != "kolo"]
        # A size that rounds to 0 elements per rank (8 B over 3 ranks) moves nothing: CSV only.
        sizes = sorted({k[2] for k in medians if k[0] == collective and k[1] == ranks and k[2] > 0})
        if not sizes:
            continue
        reduction = " sum" if collective in ("allreduce", "reduce", "reducescatter") else ""
        print(f"### {collective}, {ranks} ranks, float32{reduction}, {column}, median time")
        print()
        header = ["size"] + [f"{i} us" for i in impls] + [f"{i} GB/s" for i in impls] + [f"kolo/{p}" for p in peers]
        kolo_bound = bound_gbs(impl_transport("kolo", args.transport), ranks, limits)
        if kolo_bound:
            header.append("kolo % of bound")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---:"] * len(header)) + "|")
        ratios = defaultdict(list)  # peer -> [(size, ratio)]
        for size in sizes:
            cells = [human_size(size)]
            for i in impls:
                m = medians.get((collective, ranks, size, i))
                cells.append(f"{m[0]:.1f}" if m else "-")
            for i in impls:
                m = medians.get((collective, ranks, size, i))
                cells.append(f"{m[1]:.3f}" if m else "-")
            kolo = medians.get((collective, ranks, size, "kolo"))
            for p in peers:
                peer = medians.get((collective, ranks, size, p))
                if kolo and peer and kolo[0] > 0:
                    r = peer[0] / kolo[0]
                    ratios[p].append((size, r))
                    cells.append(f"{r:.2f}")
                else:
                    cells.append("-")
            if kolo_bound:
                cells.append(f"{100.0 * kolo[1] / kolo_bound:.1f}" if kolo else "-")
            print("| " + " | ".join(cells) + " |")
        print()
        if kolo_bound:
            print(f"Bound for kolo ({impl_transport('kolo', args.transport)}, {ranks} ranks): {kolo_bound:.2f} GB/s busbw "
                  "(see limits above and compare_report.py's bound_gbs).")
        smallest = sizes[0]
        kolo = medians.get((collective, ranks, smallest, "kolo"))
        if kolo:
            parts = [f"kolo {kolo[0]:.1f} us"]
            for p in peers:
                peer = medians.get((collective, ranks, smallest, p))
                if peer:
                    parts.append(f"{p} {peer[0]:.1f} us (time {p}/kolo {peer[0] / kolo[0]:.2f})")
            print(f"Latency at {human_size(smallest)}: " + ", ".join(parts) + ".")
        for p in peers:
            # Median and geometric mean per regime: the median shrugs off a few stalled sizes
            # (Gloo's), the geometric mean does not.
            parts = []
            for label, picked in (("up to 64 KiB", [r for s, r in ratios[p] if s <= 64 * 1024]),
                                  ("from 1 MiB", [r for s, r in ratios[p] if s >= 1 << 20])):
                if picked:
                    parts.append(f"{label} median {statistics.median(picked):.2f}, geometric mean {geomean(picked):.2f}")
            print(f"- kolo/{p}: " + "; ".join(parts) + ".")
        wrong = {k: v for k, v in wrong_total.items() if k[0] == collective and k[1] == ranks and v}
        for k, v in sorted(wrong.items()):
            print(f"- WRONG RESULTS: {k[3]} at {human_size(k[2])}: {v} elements")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
