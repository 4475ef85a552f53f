#!/usr/bin/python3
"""Fits the cost model's parameters here and checks its predictions (docs/COST_MODEL.md).

  bench/model/fit.py [--build-dir build] [--reps 5] [--rate 200] [--max 16M] [--no-netns]
                     [--save raw.json | --load raw.json]

1. Point to point: kolo-perf sendrecv between 2 ranks (each sends to the other at once: one
   message time per iteration, links are full duplex) on shared memory, over TCP loopback and,
   between two network-namespace hosts whose links tbf shapes to RATE Mbit/s
   (tests/multihost/netns-hosts.sh), over that link. Best time per size of REPS runs (the
   machine is shared and noisy), then a least-squares fit of t = alpha + beta * m minimising the
   relative error (so 1 KiB and 16 MiB weigh alike).
2. Reduction rate: a 2-rank ring all-reduce on shared memory; with alpha and beta known, what is
   left over is gamma * n/2 (least squares through the origin).
3. Check: all-reduce with ring, rd and hier forced (KOLO_ALGO), 4 namespace hosts x 2 ranks,
   links shaped as in 1, interleaved REPS times, best of each, against kolo-model's prediction
   (the library's own formulas, given the fitted values through KOLO_MODEL_*).
Prints the fitted KOLO_MODEL_* values and a markdown table of predicted vs measured times.
Steps 1 (namespace part) and 3 need root; they hold /run/kolo-multihost.lock like the
multihost tests.
"""
import argparse
import fcntl
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET = os.path.join(ROOT, "tests/multihost/netns-hosts.sh")


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def perf(build, coll, lo, hi, env=None, hosts=None, nranks=2, iters=5, warmup=2):
    """One kolo-perf run; returns {bytes: time_us} of the out-of-place rows."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [os.path.join(build, "tools/kolorun/kolorun")]
        if hosts:
            cmd += ["--hosts", hosts, "--launch-agent", "ip netns exec {host}", "-x", "KOLO_SOCKET_IFNAME=eth"]
        else:
            cmd += ["-n", str(nranks)]
        for k, v in (env or {}).items():
            cmd += ["-x", f"{k}={v}"]
        cmd += [os.path.join(build, "bench/perf/kolo-perf"), coll, "-b", lo, "-e", hi, "-f", "4",
                "-w", str(warmup), "-n", str(iters), "-c", "0", "--json", out]
        run_env = dict(os.environ, KOLO_SECRET="kolo-model-fit")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=1800)
        if proc.returncode != 0:
            sys.exit(f"fit.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        with open(out) as f:
            doc = json.load(f)
    return {r["size_bytes"]: r["time_us"] for r in doc["rows"] if r["placement"] == "out"}


def best_of(runs):
    best = {}
    for run in runs:
        for size, t in run.items():
            best[size] = min(t, best.get(size, math.inf))
    return best


def fit_link(times):
    """alpha: the smallest message's time (nearly all latency); beta: least squares of
    alpha + beta*m = t, relative (the sum of ((alpha + beta*m)/t - 1)^2, so 64 KiB and 16 MiB
    weigh alike), over the sizes from 64 KiB, where the bytes dominate. A free two-parameter
    fit over every size gives alpha ~ 0 on the shaped link, whose tbf burst lets the first
    4 KiB through at line rate, and letting the small sizes into beta's fit drags beta below
    the line rate's."""
    alpha = times[min(times)]
    large = {m: t for m, t in times.items() if m >= 64 * 1024}
    num = sum((m / t) * (1 - alpha / t) for m, t in large.items())
    den = sum((m / t) ** 2 for m, t in large.items())
    return alpha, max(num / den, 1e-12)  # us, us per byte


def link_spec(alpha_us, beta_us_per_byte):
    return f"{alpha_us:.2f},{1e-3 / beta_us_per_byte:.4g}"  # GB/s = bytes/us / 1000


def report_link(name, times, alpha, beta):
    print(f"# {name}: alpha {alpha:.2f} us, beta {beta * 1e3:.4f} ns/B ({1e-3 / beta:.3f} GB/s)")
    print("#   bytes   measured_us   fitted_us   error")
    for m in sorted(times):
        f = alpha + beta * m
        print(f"#   {m:>9} {times[m]:>11.1f} {f:>11.1f} {100 * (f - times[m]) / times[m]:>+6.0f}%")


def predictions(build, env, hosts, per, lo, hi):
    proc = subprocess.run([os.path.join(build, "bench/model/kolo-model"), "allreduce", str(hosts), str(per), lo, hi, "4"],
                          capture_output=True, text=True, env=dict(os.environ, **env), check=True)
    pred, chosen = {}, {}
    for line in proc.stdout.split("\n"):
        f = line.split()
        if len(f) != 3:
            continue
        if f[1] == "selected":
            chosen[int(f[0])] = f[2]
        else:
            pred[(int(f[0]), f[1])] = float(f[2])
    return pred, chosen


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rate", default="200", help="Mbit/s of each namespace host's link (tbf)")
    ap.add_argument("--min", default="64K", help="smallest all-reduce of the check")
    ap.add_argument("--max", default="16M", help="largest all-reduce of the check")
    ap.add_argument("--no-netns", action="store_true", help="only the shm and tcp fits (no root needed)")
    ap.add_argument("--save", help="write the raw measurements to this JSON file")
    ap.add_argument("--load", help="fit and predict from raw measurements saved by --save (no runs)")
    o = ap.parse_args()
    build = os.path.abspath(o.build_dir)

    if o.load:
        with open(o.load) as f:
            raw = {k: {kk: {int(m): t for m, t in vv.items()} for kk, vv in v.items()} if k == "allreduce" else
                   {int(m): t for m, t in v.items()} for k, v in json.load(f).items()}
    else:
        raw = measure(o, build)
        if o.save:
            with open(o.save, "w") as f:
                json.dump(raw, f, indent=1)
    a_shm, b_shm = fit_link(raw["shm"])
    a_tcp, b_tcp = fit_link(raw["tcp"])
    report_link("shm (2 ranks, sendrecv)", raw["shm"], a_shm, b_shm)
    report_link("tcp loopback (2 ranks, sendrecv)", raw["tcp"], a_tcp, b_tcp)
    chunk = parse_size(os.environ.get("KOLO_CHUNK_BYTES", "512K"))
    num = den = 0.0
    for n, t in raw["ring2"].items():  # 2-rank ring: 2 steps of n/2 in k chunks each, one reduction of n/2
        k = max(1, math.ceil(n / 2 / chunk))
        rest = t - 2 * (k * a_shm + n / 2 * b_shm)
        num += rest * (n / 2); den += (n / 2) ** 2
    gamma = max(num / den, 1e-9)  # us per byte
    print(f"# reduction: gamma {gamma * 1e3:.4f} ns/B ({1e-3 / gamma:.3f} GB/s), from 2-rank ring all-reduce on shm")
    print(f"KOLO_MODEL_SHM={link_spec(a_shm, b_shm)}")
    print(f"KOLO_MODEL_REDUCE_GBPS={1e-3 / gamma:.4g}")
    print(f"# tcp loopback as a link: {link_spec(a_tcp, b_tcp)}")
    if "net" not in raw:
        return
    a_net, b_net = fit_link(raw["net"])
    report_link(f"netns link shaped to {o.rate} Mbit/s (1 rank per host, sendrecv)", raw["net"], a_net, b_net)
    print(f"KOLO_MODEL_NET={link_spec(a_net, b_net)}")

    algos = ["ring", "rd", "hier"]
    measured = raw["allreduce"]
    env = {"KOLO_MODEL_SHM": link_spec(a_shm, b_shm), "KOLO_MODEL_NET": link_spec(a_net, b_net),
           "KOLO_MODEL_REDUCE_GBPS": f"{1e-3 / gamma:.4g}"}
    sizes = sorted(measured["ring"])
    pred, chosen = predictions(build, env, 4, 2, str(sizes[0]), str(sizes[-1]))
    print(f"\n4 hosts x 2 ranks, links {o.rate} Mbit/s, all-reduce float sum, best of {o.reps}: "
          "predicted / measured us (error)\n")
    print("| bytes | " + " | ".join(algos) + " | model picks | fastest measured |")
    print("|---|" + "---|" * (len(algos) + 2))
    for n in sizes:
        cells = []
        for a in algos:
            m, p = measured[a][n], pred[(n, a)]
            cells.append(f"{p:,.0f} / {m:,.0f} ({100 * (p - m) / m:+.0f} %)")
        fastest = min(algos, key=lambda a: measured[a][n])
        print(f"| {n:,} | " + " | ".join(cells) + f" | {chosen.get(n, '?')} | {fastest} |")


def measure(o, build):
    """Every measurement, best of o.reps each: {shm, tcp, ring2, net: {bytes: us}, allreduce: {algo: {bytes: us}}}."""
    raw = {}
    raw["shm"] = best_of(perf(build, "sendrecv", "1K", "16M") for _ in range(o.reps))
    raw["tcp"] = best_of(perf(build, "sendrecv", "1K", "16M", env={"KOLO_TRANSPORT": "tcp"}) for _ in range(o.reps))
    raw["ring2"] = best_of(perf(build, "allreduce", "64K", "16M", env={"KOLO_ALGO": "allreduce=ring"})
                           for _ in range(o.reps))
    if o.no_netns:
        return raw
    lock = open("/run/kolo-multihost.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        subprocess.run([NET, "up", "--hosts", "2", "--rate", o.rate], check=True, capture_output=True)
        raw["net"] = best_of(perf(build, "sendrecv", "1K", "16M", hosts="kolo-h0:1,kolo-h1:1", iters=5, warmup=2)
                             for _ in range(o.reps))
        subprocess.run([NET, "down"], check=True, capture_output=True)
        subprocess.run([NET, "up", "--hosts", "4", "--rate", o.rate], check=True, capture_output=True)
        runs = {a: [] for a in ("ring", "rd", "hier")}
        for _ in range(o.reps):  # interleaved, so that a burst of load hits all three alike
            for a in runs:
                runs[a].append(perf(build, "allreduce", o.min, o.max, env={"KOLO_ALGO": f"allreduce={a}"},
                                    hosts="kolo-h0:2,kolo-h1:2,kolo-h2:2,kolo-h3:2", iters=3, warmup=1))
        raw["allreduce"] = {a: best_of(r) for a, r in runs.items()}
    finally:
        subprocess.run([NET, "down"], capture_output=True)
        lock.close()
    return raw


if __name__ == "__main__":
    main()
