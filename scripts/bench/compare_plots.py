#!/usr/bin/env python3
"""PNG charts of compare.sh's medians with gnuplot: for every (collective, ranks) one PNG with
bus bandwidth (left) and time (right) against message size, one line per implementation (kolo
and each peer), and the physical bound of kolo's transport as a dashed line. Files are named
<collective>_n<ranks>_<kolo transport>.png. Does nothing (and says so) without gnuplot."""
import os
import shutil
import subprocess
import sys
from collections import defaultdict


def write_plots(records, out_dir, kolo_transport):
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("compare_plots.py: no gnuplot (apt-get install gnuplot-nox): no PNG charts", file=sys.stderr)
        return []
    os.makedirs(out_dir, exist_ok=True)
    groups = defaultdict(list)
    for r in records:
        if r["size_bytes"] > 0:
            groups[(r["collective"], r["ranks"])].append(r)
    written = []
    for (collective, ranks), rows in sorted(groups.items()):
        impls = []
        for r in rows:
            if r["impl"] not in impls:
                impls.append(r["impl"])
        stem = os.path.join(out_dir, f"{collective}_n{ranks}_{kolo_transport}")
        series = []
        for impl in impls:
            data = f"{stem}.{impl}.dat"
            with open(data, "w") as f:
                for r in sorted((r for r in rows if r["impl"] == impl), key=lambda r: r["size_bytes"]):
                    f.write(f"{r['size_bytes']} {r['busbw_gbs']} {r['median_time_us']}\n")
            series.append((impl, data))
        bound = next((r["bound_gbs"] for r in rows if r["impl"] == "kolo" and r["bound_gbs"]), None)
        png = stem + ".png"
        title = f"{collective}, {ranks} ranks, kolo over {kolo_transport}"
        bw_lines = [f"'{d}' using 1:2 with linespoints title '{i}'" for i, d in series]
        if bound:
            bw_lines.append(f"{bound} with lines dashtype 2 lc rgb 'gray40' title 'bound {bound:.2f} GB/s'")
        t_lines = [f"'{d}' using 1:3 with linespoints title '{i}'" for i, d in series]
        script = "\n".join([
            "set terminal pngcairo size 1100,420 font 'sans,9'",
            f"set output '{png}'",
            "set multiplot layout 1,2",
            "set logscale x 2", "set format x '%.0b%B'", "set xlabel 'message size (bytes)'",
            "set grid", "set key top left",
            f"set title '{title}: bus bandwidth'", "set ylabel 'busbw (GB/s)'",
            "plot " + ", ".join(bw_lines),
            "set logscale y 10", "set format y '%g'",
            f"set title '{title}: time'", "set ylabel 'time (us)'",
            "plot " + ", ".join(t_lines),
            "unset multiplot",
        ]) + "\n"
        result = subprocess.run([gnuplot], input=script, text=True, capture_output=True)
        for _, d in series:
            os.remove(d)
        if result.returncode != 0 or not os.path.exists(png):
            print(f"compare_plots.py: gnuplot failed for {png}: {result.stderr.strip()}", file=sys.stderr)
            continue
        written.append(png)
    if written:
        print(f"compare_plots.py: wrote {len(written)} chart(s) in {out_dir}", file=sys.stderr)
    return written
