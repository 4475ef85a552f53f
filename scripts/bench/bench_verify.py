#!/usr/bin/env python3
"""Verifies what scripts/bench/bench-all.sh produced in OUT: every table ran to the end with every
checked element right (#wrong == 0 in every row of every JSON, CSV and text table), the CSV holds
the same rows as the JSON, compare.sh wrote its CSV/JSON/limits/report (and PNG charts when
gnuplot is installed), and the micro-benchmarks wrote their results. Prints every problem and
exits 1 if there is any. Speed is never judged here.

    scripts/bench/bench_verify.py OUT
"""
import csv
import glob
import json
import os
import shutil
import sys


def check_table(stem, problems):
    """OUT/<stem>.json, .csv and .txt of one kolo-perf / peer run."""
    try:
        with open(stem + ".json") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{stem}.json: unreadable ({e})")
        return 0
    rows = doc.get("rows", [])
    if not rows:
        problems.append(f"{stem}.json: no rows")
    bad = [r for r in rows if r.get("wrong") not in (0, None)]
    if bad:
        problems.append(f"{stem}.json: {len(bad)} row(s) with wrong elements, first {bad[0]}")
    if doc.get("check") and not any(r.get("wrong") == 0 for r in rows):
        problems.append(f"{stem}.json: checking was on but no row was checked")
    if doc.get("total_wrong") != 0 or doc.get("exit_status") != 0:
        problems.append(f"{stem}.json: total_wrong {doc.get('total_wrong')}, exit_status {doc.get('exit_status')}")
    try:
        with open(stem + ".csv", newline="") as f:
            csv_rows = list(csv.DictReader(f))
        if len(csv_rows) != len(rows):
            problems.append(f"{stem}.csv: {len(csv_rows)} rows, the JSON has {len(rows)}")
        if any(r["wrong"] not in ("0", "") for r in csv_rows):
            problems.append(f"{stem}.csv: a row with wrong elements")
    except (OSError, KeyError) as e:
        problems.append(f"{stem}.csv: unreadable ({e})")
    try:
        with open(stem + ".txt") as f:
            text = f.read()
        if "# Out of bounds values : 0 OK" not in text:
            problems.append(f"{stem}.txt: no '# Out of bounds values : 0 OK' footer")
    except OSError as e:
        problems.append(f"{stem}.txt: unreadable ({e})")
    return len(rows)


def check_compare(base, problems):
    """One compare.sh results directory (OUT/compare-<transport>)."""
    name_of = os.path.basename(base)
    for name in ("compare.csv", "compare.json", "report.md", "meta.txt"):
        if not os.path.isfile(os.path.join(base, name)):
            problems.append(f"{name_of}/{name}: missing")
    if not os.path.isfile(os.path.join(base, "compare.csv")):
        return
    with open(os.path.join(base, "compare.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    if not any(r["impl"] == "kolo" for r in rows):
        problems.append(f"{name_of}/compare.csv: no kolo rows")
    if any(r["wrong"] not in ("0", "") for r in rows):
        problems.append(f"{name_of}/compare.csv: a row with wrong elements")
    if not os.path.isfile(os.path.join(base, "limits.json")):
        problems.append(f"{name_of}/limits.json: missing (physical limits not measured)")
    if shutil.which("gnuplot"):
        pngs = [p for p in glob.glob(os.path.join(base, "plots", "*.png")) if os.path.getsize(p) > 0]
        if not pngs:
            problems.append(f"{name_of}/plots: gnuplot is installed but no PNG chart was written")


def check_micro(out, problems):
    for path in glob.glob(os.path.join(out, "micro", "*.json")):
        try:
            with open(path) as f:
                if not json.load(f).get("benchmarks"):
                    problems.append(f"{path}: no benchmark results")
        except (OSError, ValueError) as e:
            problems.append(f"{path}: unreadable ({e})")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    problems = []
    # A peer run retried by bench-all.sh keeps its failed first log as *.first-try.txt: not a table.
    stems = sorted(p[:-4] for p in glob.glob(os.path.join(out, "perf", "*.txt")) + glob.glob(os.path.join(out, "peers", "*.txt"))
                   if not p.endswith(".first-try.txt"))
    if not any("/perf/" in s for s in stems):
        problems.append("perf/: no kolo-perf tables")
    rows = sum(check_table(s, problems) for s in stems)
    compares = sorted(glob.glob(os.path.join(out, "compare-*/")))
    if not compares:
        problems.append("compare-*/: compare.sh wrote nothing")
    for base in compares:
        check_compare(base.rstrip("/"), problems)
    check_micro(out, problems)
    for p in problems:
        print(f"bench_verify.py: {p}", file=sys.stderr)
    print(f"bench_verify.py: {len(stems)} tables, {rows} measured rows, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
