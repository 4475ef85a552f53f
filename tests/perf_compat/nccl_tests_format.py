"""A reader of nccl-tests' output, written from nccl-tests' own format strings (its src/util.cu,
version 2.19) and not from kolo's: if kolo-perf's table, footer or -J document drifts from
nccl-tests' in any way a script could notice, this module raises FormatError.

Rows are cut at nccl-tests' fixed columns:
    "%12li  %12li  %8s  %6s  %6s"            size, count, type, redop, root
    "  %7s  %6s  %6s  %6g"                   time, algbw, busbw, #wrong; out-of-place, then in-place
    "  %7s  %6s  %6s    N/A"                  the same unchecked: nccl-tests' N/A is one column
                                              narrower than its %6g, and scripts cope with that
    "%21s"                                    a timestamp, with -S 1
so a field one character too wide (a bandwidth of 1000 GB/s or more printed with 2 decimals, a
#wrong printed %5g) fails, as it breaks every awk/cut script written for nccl-tests.
"""
import re

ROW_PREFIX = [("size", 12), ("count", 12), ("type", 8), ("redop", 6), ("root", 6)]
PLACEMENT = [("time", 7), ("algbw", 6), ("busbw", 6), ("wrong", 6)]
PER_ITERATION = [("i_min", 7), ("i_max", 7), ("i_p99", 7), ("i_cv", 7)]  # "  %7s" each, with -I 1
TIMESTAMP_WIDTH = 21


class FormatError(Exception):
    pass


def header_lines(time_label="time", timestamps=False, per_iter=False):
    """nccl-tests' writeResultHeader, rendered with its own format strings."""
    pad, label, fmt = (19, "timestamp", "%Y-%m-%d %H:%M:%S") if timestamps else (0, "", "")
    if per_iter:
        line1 = ("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)"
                 "                                in-place (+ per-iteration)") % ("", "", "", "", "")
        row = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s"
               "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s")
        line2 = row % ("size", "count", "type", "redop", "root", time_label, "algbw", "busbw", "#wrong", "i_min",
                       "i_max", "i_p99", "i_cv%", time_label, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
                       "i_cv%", pad, label)
        line3 = row % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
                       "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", pad, fmt)
        return [line1, line2, line3]
    line1 = "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % (
        "", "", "", "", "")
    row = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
    line2 = row % ("size", "count", "type", "redop", "root", time_label, "algbw", "busbw", "#wrong",
                   time_label, "algbw", "busbw", "#wrong", pad, label)
    line3 = row % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                   "(GB/s)", "", pad, fmt)
    return [line1, line2, line3]


# nccl-tests' parseRankInfo: "#  Rank %d Group %d Pid %d on %s device %d [%s] %s"
RANK_LINE = re.compile(r"^#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([^\]]+)\] (.+)$")
PARAMS_LINE = re.compile(
    r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
    r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+) unalign: (\d+)$")


def _cut(line, pos, width, what):
    field = line[pos:pos + width]
    if len(field) != width or field != field.rjust(width) or field.strip() == "" or " " in field.strip():
        raise FormatError("%s: %r is not a right-aligned %d-character field in %r" % (what, field, width, line))
    return field.strip(), pos + width


def _gap(line, pos, n, what):
    if line[pos:pos + n] != " " * n:
        raise FormatError("expected %d spaces before %s at column %d of %r" % (n, what, pos, line))
    return pos + n


def parse_row(line, timestamps=False, per_iter=False):
    row, pos = {}, 0
    for i, (name, width) in enumerate(ROW_PREFIX):
        if i:
            pos = _gap(line, pos, 2, name)
        value, pos = _cut(line, pos, width, name)
        row[name] = value
    for name in ("size", "count", "root"):
        row[name] = int(row[name])
    for placement in ("out_of_place", "in_place"):
        group = {}
        for name, width in PLACEMENT:
            if name == "wrong" and line[pos:pos + 7] == "    N/A":
                group[name], pos = None, pos + 7
                continue
            pos = _gap(line, pos, 2, name)
            value, pos = _cut(line, pos, width, name)
            if name == "wrong":
                group[name] = int(float(value))
            else:
                group[name] = float(value)
        for name, width in PER_ITERATION if per_iter else []:
            pos = _gap(line, pos, 2, name)
            value, pos = _cut(line, pos, width, name)
            group[name] = float(value)
        row[placement] = group
    if timestamps:
        stamp, pos = line[pos:pos + TIMESTAMP_WIDTH], pos + TIMESTAMP_WIDTH
        if not re.fullmatch(r" +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", stamp):
            raise FormatError("bad timestamp %r in %r" % (stamp, line))
    if pos != len(line):
        raise FormatError("%d characters past nccl-tests' last column in %r" % (len(line) - pos, line))
    return row


def parse_log(text, time_label="time", timestamps=False, per_iter=False):
    """The run as nccl-tests' users read it. Raises FormatError on any line out of place."""
    lines = text.split("\n")
    log = {"rows": [], "ranks": [], "notes": [], "json_path": None}
    i = 0
    if lines[i].startswith("# Writing JSON output to "):
        log["json_path"] = lines[i][len("# Writing JSON output to "):]
        i += 1
    if not re.match(r"^# nccl-tests version \S+ nccl-headers=\d+ nccl-library=\d+", lines[i]):
        raise FormatError("first line is not nccl-tests' version line: %r" % lines[i])
    i += 1
    m = re.match(r"^# Collective test starting: (\S+)$", lines[i])
    if not m:
        raise FormatError("no 'Collective test starting' line: %r" % lines[i])
    log["program"] = m.group(1)
    i += 1
    m = PARAMS_LINE.match(lines[i])
    if not m:
        raise FormatError("parameter line is not nccl-tests': %r" % lines[i])
    log["params"] = m.groups()
    i += 1
    while lines[i].startswith("# ") and lines[i] != "# Using devices":  # -z lines, notes
        log["notes"].append(lines[i][2:])
        i += 1
    if lines[i] != "#" or lines[i + 1] != "# Using devices":
        raise FormatError("expected '#' and '# Using devices', got %r, %r" % (lines[i], lines[i + 1]))
    i += 2
    while RANK_LINE.match(lines[i]):
        log["ranks"].append(RANK_LINE.match(lines[i]).groups())
        i += 1
    if lines[i] != "#":
        raise FormatError("expected '#' after the devices, got %r" % lines[i])
    i += 1
    want = header_lines(time_label, timestamps, per_iter)
    if lines[i:i + 3] != want:
        raise FormatError("header differs from nccl-tests':\n%s\nwanted:\n%s" % (
            "\n".join(lines[i:i + 3]), "\n".join(want)))
    i += 3
    while i < len(lines) and not lines[i].startswith("#"):
        log["rows"].append(parse_row(lines[i], timestamps, per_iter))
        i += 1
    m = re.match(r"^# Out of bounds values : (\d+) (OK|FAILED)$", lines[i])
    if not m:
        raise FormatError("no 'Out of bounds values' line: %r" % lines[i])
    log["out_of_bounds"], log["out_of_bounds_verdict"] = int(m.group(1)), m.group(2)
    m = re.match(r"^# Avg bus bandwidth    : (\S+) ?(OK|FAILED)?$", lines[i + 1])
    if not m:
        raise FormatError("no 'Avg bus bandwidth' line: %r" % lines[i + 1])
    log["avg_busbw"], log["avg_busbw_verdict"] = float(m.group(1)), m.group(2) or ""
    if lines[i + 2] != "#" or lines[i + 3] != "# Collective test concluded: " + log["program"]:
        raise FormatError("bad footer: %r" % lines[i + 2:i + 4])
    if lines[i + 4] != "#" or lines[i + 5] != "":
        raise FormatError("bad end of footer: %r" % lines[i + 4:i + 6])
    log["failure_line"] = lines[i + 6] if i + 6 < len(lines) else ""
    return log


def _kind(value, kind, where):
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "num": isinstance(value, (int, float)) and not isinstance(value, bool) or value == "nan",
        "str": isinstance(value, str),
        "strbool": value in ("true", "false"),
        "list": isinstance(value, list),
    }[kind]
    if not ok:
        raise FormatError("%s: %r is not %s" % (where, value, kind))


def _keys(obj, keys, where):
    if not isinstance(obj, dict) or list(obj.keys()) != keys:
        raise FormatError("%s: keys %r, nccl-tests writes %r" % (
            where, list(obj.keys()) if isinstance(obj, dict) else obj, keys))


PER_ITER_KEYS = ["skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us",
                 "cv_pct", "times_us"]


def check_json(doc, cputime=False):
    """nccl-tests' -J document (JSON_FILE_VERSION 3): the same keys in the same order, the same
    value kinds (its booleans are the strings "true"/"false", the root a %6i string)."""
    _keys(doc, ["version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds",
                "average_bus_bandwidth", "errors", "end_time"], "document")
    if doc["version"] != 3:
        raise FormatError("version %r, nccl-tests writes 3" % doc["version"])
    for key in ("start_time", "end_time"):
        if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", doc[key]):
            raise FormatError("%s: %r" % (key, doc[key]))
    for key in ("args", "env"):
        _kind(doc[key], "list", key)
        for s in doc[key]:
            _kind(s, "str", key)
    _kind(doc["nccl_version"], "int", "nccl_version")
    config = doc["config"]
    step = "step_factor" if "step_factor" in config else "step_bytes"
    _keys(config, ["nthreads", "ngpus", "minimum_bytes", "maximum_bytes", step, "warmup_iters", "iterations",
                   "aggregated_iterations", "validation", "graph", "blocking_collectives", "per_iter_timing",
                   "per_iter_skip", "parallel_init", "devices"], "config")
    for key, kind in [("nthreads", "int"), ("ngpus", "int"), ("minimum_bytes", "int"), ("maximum_bytes", "int"),
                      (step, "int"), ("warmup_iters", "int"), ("iterations", "int"),
                      ("aggregated_iterations", "int"), ("validation", "int"), ("graph", "int"),
                      ("blocking_collectives", "strbool"), ("per_iter_timing", "strbool"),
                      ("per_iter_skip", "int"), ("parallel_init", "strbool")]:
        _kind(config[key], kind, "config." + key)
    for d in config["devices"]:
        _keys(d, ["rank", "group", "pid", "hostname", "device", "device_hex", "device_info"], "device")
        for key, kind in [("rank", "int"), ("group", "int"), ("pid", "int"), ("hostname", "str"),
                          ("device", "int"), ("device_hex", "str"), ("device_info", "str")]:
            _kind(d[key], kind, "device." + key)
    time_key = "cpu_time" if cputime else "time"
    per_iter = config["per_iter_timing"] == "true"
    for r in doc["results"]:
        placements = (["out_of_place", "out_of_place_per_iter", "in_place", "in_place_per_iter"] if per_iter
                      else ["out_of_place", "in_place"])
        _keys(r, ["size", "count", "type", "redop", "root"] + placements + ["actual_iterations", "experiment_name"],
              "result")
        for key in placements[1::2] if per_iter else []:
            p = r[key]
            extra = ["per_process_max_times_us"] if "per_process_max_times_us" in p else []
            _keys(p, PER_ITER_KEYS + extra, key)
            _kind(p["skipped_iterations"], "int", key + ".skipped_iterations")
            for k in PER_ITER_KEYS[1:-1]:
                _kind(p[k], "num", key + "." + k)
            if len(p["times_us"]) != r["actual_iterations"]:
                raise FormatError("%s.times_us: %d times for %d iterations" % (
                    key, len(p["times_us"]), r["actual_iterations"]))
            for row in p.get("per_process_max_times_us", []):
                if len(row) != len(p["times_us"]):
                    raise FormatError("%s: a process row of %d times" % (key, len(row)))
        for key, kind in [("size", "int"), ("count", "int"), ("type", "str"), ("redop", "str"), ("root", "str"),
                          ("actual_iterations", "int"), ("experiment_name", "str")]:
            _kind(r[key], kind, "result." + key)
        if len(r["root"]) != 6:
            raise FormatError("root %r is not nccl-tests' %%6i string" % r["root"])
        for placement in ("out_of_place", "in_place"):
            p = r[placement]
            _keys(p, [time_key, "alg_bw", "bus_bw", "nwrong"], placement)
            for key in (time_key, "alg_bw", "bus_bw"):
                _kind(p[key], "num", placement + "." + key)
            if p["nwrong"] is not None:
                _kind(p["nwrong"], "num", placement + ".nwrong")
    _keys(doc["out_of_bounds"], ["count", "okay"], "out_of_bounds")
    _kind(doc["out_of_bounds"]["count"], "int", "out_of_bounds.count")
    _kind(doc["out_of_bounds"]["okay"], "strbool", "out_of_bounds.okay")
    _keys(doc["average_bus_bandwidth"], ["bandwidth", "okay"], "average_bus_bandwidth")
    _kind(doc["average_bus_bandwidth"]["bandwidth"], "num", "average_bus_bandwidth.bandwidth")
    if doc["average_bus_bandwidth"]["okay"] not in ("true", "false", "unchecked"):
        raise FormatError("average_bus_bandwidth.okay: %r" % doc["average_bus_bandwidth"]["okay"])
    _kind(doc["errors"], "list", "errors")
