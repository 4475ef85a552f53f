"""kolo-perf as a drop-in for nccl-tests: runs kolo-perf under nccl-tests' program names and flags
under kolorun, reads stdout with nccl_tests_format (a reader of nccl-tests' format), checks the -J
document against nccl-tests' schema, and checks nccl-tests' exit status 7 for wrong data
(--inject-wrong) and for a bandwidth floor that cannot be met (NCCL_TESTS_MIN_BW, --min-bw).
pytest; meson's test sets KOLORUN (the launcher) and KOLO_PERF_DIR (the build's bench/perf, holding
kolo-perf and the all_reduce_perf, ... symlinks).
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccl_tests_format as fmt  # noqa: E402

KOLORUN, PERF_DIR = os.environ["KOLORUN"], os.environ["KOLO_PERF_DIR"]
NAMES = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather", "broadcast_perf": "broadcast",
         "reduce_perf": "reduce", "reduce_scatter_perf": "reducescatter", "alltoall_perf": "alltoall",
         "scatter_perf": "scatter", "gather_perf": "gather", "sendrecv_perf": "sendrecv"}
SMALL = ["-b", "8", "-e", "4K", "-f", "8", "-n", "2", "-w", "1"]


def run(program, args, ranks=2, env=None):
    full_env = dict(os.environ)
    for name in ("NCCL_TESTS_MIN_BW", "KOLO_PERF_MIN_BW"):
        full_env.pop(name, None)
    full_env.update(env or {})
    cmd = [KOLORUN, "-n", str(ranks), os.path.join(PERF_DIR, program)] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, timeout=120)
    return r.returncode, r.stdout, r.stderr



def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def test_every_program_name_prints_nccl_tests_table():
    for program, coll in NAMES.items():
        code, out, err = run(program, SMALL + ["-c", "1"])
        expect(code == 0, "%s exited %d\n%s\n%s" % (program, code, out, err))
        log = fmt.parse_log(out)
        expect(log["program"] == program, "%s announced %s" % (program, log["program"]))
        expect(len(log["ranks"]) == 2, "%s: %d rank lines" % (program, len(log["ranks"])))
        expect(len(log["rows"]) == len(sizes(8, 4096, 8)), "%s: %d rows" % (program, len(log["rows"])))
        for row in log["rows"]:
            for placement in ("out_of_place", "in_place"):
                w = row[placement]["wrong"]
                expect(w in (0, None), "%s: %s #wrong %r" % (program, placement, w))
        expect(log["out_of_bounds"] == 0 and log["out_of_bounds_verdict"] == "OK", program + ": out of bounds")
        expect(log["avg_busbw_verdict"] == "", program + ": a verdict with no floor")
        expect(log["failure_line"] == "", program + ": " + log["failure_line"])


def test_json_document_matches_nccl_tests_schema_and_the_table():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        code, out, err = run("all_reduce_perf", SMALL + ["-c", "1", "-J", path, "-d", "double", "-o", "max"])
        expect(code == 0, "exit %d\n%s\n%s" % (code, out, err))
        log = fmt.parse_log(out)
        expect(log["json_path"] == path, "no 'Writing JSON output' line naming %s" % path)
        with open(path) as f:
            doc = json.load(f)
        fmt.check_json(doc)
        expect(len(doc["results"]) == len(log["rows"]), "JSON has %d results, table %d rows" % (
            len(doc["results"]), len(log["rows"])))
        for r, row in zip(doc["results"], log["rows"]):
            expect((r["size"], r["count"], r["type"], r["redop"], int(r["root"])) ==
                   (row["size"], row["count"], row["type"], row["redop"], row["root"]), "row %r vs %r" % (r, row))
            expect(r["type"] == "double" and r["redop"] == "max", "type/op %r" % r)
            expect(r["out_of_place"]["nwrong"] == 0, "nwrong %r" % r["out_of_place"])
        expect(doc["config"]["validation"] == 1 and doc["config"]["warmup_iters"] == 1, "config %r" % doc["config"])
        expect(doc["out_of_bounds"] == {"count": 0, "okay": "true"}, "out_of_bounds %r" % doc["out_of_bounds"])
        expect(doc["average_bus_bandwidth"]["okay"] == "unchecked", "okay %r" % doc["average_bus_bandwidth"])
        expect(os.path.basename(doc["args"][0]) == "all_reduce_perf", "args %r" % doc["args"])
        # A second run never overwrites the first: nccl-tests moves on to run.json.0.
        code, out, err = run("all_reduce_perf", SMALL + ["-J", path])
        expect(code == 0 and os.path.exists(path + ".0"), "second -J run: exit %d, files %r" % (code, os.listdir(tmp)))


def test_gpu_flags_are_accepted_and_noted_and_cpu_meaningful_ones_work():
    # -g and -G are kolo-perf's own (device memory, test_gpu_memory_*); -g 0 is host memory.
    args = SMALL + ["-t", "1", "-g", "0", "-G", "0", "-R", "1", "-y", "0", "-p", "0", "-M", "1", "-I", "0",
                    "-m", "2", "-N", "2", "-z", "3", "-c", "3", "-C", "1", "-S", "1", "-u", "1", "-a", "3"]
    code, out, err = run("all_reduce_perf", args)
    expect(code == 0, "exit %d\n%s\n%s" % (code, out, err))
    log = fmt.parse_log(out, time_label="cputime", timestamps=True)
    notes = "\n".join(log["notes"])
    for flag in ("-R 1:", "-M 1:"):
        expect(flag in notes, "no '# %s' note in:\n%s" % (flag, notes))
    expect("Blocking Enabled: wait and barrier after each outer iteration" in notes, "no -z 3 line:\n" + notes)
    expect(len(log["rows"]) == 2 * len(sizes(8, 4096, 8)), "-N 2: %d rows" % len(log["rows"]))
    params = log["params"]
    expect(params[8] == "2" and params[9] == "3" and params[11] == "1", "agg iters/validation/unalign %r" % (params,))
    # Long forms, attached values and options after the collective, as getopt_long reads them.
    code, out, err = run("kolo-perf", ["--minbytes=8", "--maxbytes", "1K", "-f8", "allreduce", "--iters", "2",
                                       "--check", "1", "--warmup_iters=0"])
    expect(code == 0, "long forms: exit %d\n%s" % (code, err))
    expect(fmt.parse_log(out)["program"] == "all_reduce_perf", "kolo-perf allreduce is all_reduce_perf")


def no_gpu_here():
    """Whether this machine has no NVIDIA GPU (then -g 1 must be refused, not run on the host)."""
    return not os.path.exists("/dev/nvidia0")


def test_gpu_memory_without_a_gpu_is_refused_not_measured_on_the_host():
    # nccl-tests' -g 1 (GPUs per process) measures device memory; where there is none, or in a
    # build without CUDA, kolo-perf must fail, never print a table of host-memory numbers.
    if not no_gpu_here():
        pytest.skip("this machine has a GPU (scripts/env/device-check.d/perf.sh checks -g 1 there)")
    for program, args in (("all_reduce_perf", SMALL + ["-c", "1", "-g", "1"]),
                          ("kolo-perf", ["broadcast", "--ngpus=1"] + SMALL)):
        code, out, err = run(program, args)
        expect(code == 3, "%s -g 1 without a GPU: exit %d (3 expected)\n%s\n%s" % (program, code, out, err))
        expect("-g 1: no usable CUDA device" in err or "-g 1: this kolo-perf was built without CUDA" in err,
               "no clear message for -g 1 without a GPU:\n" + err)
        expect("Using devices" not in out and "Avg bus bandwidth" not in out, "-g 1 measured something:\n" + out)


def test_gpu_flags_kolo_cannot_honour_are_refused():
    # -g 2 (two GPUs in one process) and -G (CUDA graphs) would change what is measured: a usage
    # error (2) before anything runs, GPU or not.
    for args, message in ((["-g", "2"], "-g 2: kolo serves one GPU per process"),
                          (["--ngpus", "8"], "-g 8: kolo serves one GPU per process"),
                          (["-G", "1"], "-G 1: CUDA graph capture is not supported yet"),
                          (["-g", "1", "--cudagraph=4"], "-G 4: CUDA graph capture is not supported yet")):
        code, out, err = run("all_reduce_perf", SMALL + args)
        expect(code == 2 and message in err, "%r: exit %d, stderr:\n%s" % (args, code, err))
        expect("Avg bus bandwidth" not in out, "%r measured something:\n%s" % (args, out))
    code, out, err = run("all_reduce_perf", SMALL + ["-g", "2000"])
    expect(code == 2 and "-g" in err, "-g 2000: exit %d, %s" % (code, err))


def test_host_memory_without_g_or_with_g_0():
    with tempfile.TemporaryDirectory() as tmp:
        for extra in ([], ["-g", "0"]):
            path = os.path.join(tmp, "host%d.json" % len(extra))
            code, out, err = run("all_reduce_perf", SMALL + ["-c", "1", "--json", path] + extra)
            expect(code == 0, "%r: exit %d\n%s" % (extra, code, err))
            log = fmt.parse_log(out)
            # The rank lines' (rank, group, pid, host, device, [pci], info): a CPU, not a GPU.
            expect(len(log["ranks"]) == 2 and all(r[5] == "0000:00:00" and r[6].startswith("cpu ")
                                                  for r in log["ranks"]), "host rank lines: %r" % log["ranks"])
            with open(path) as f:
                doc = json.load(f)
            expect(doc["memory"] == "host" and "devices" not in doc, "--json memory: %r" % doc.get("memory"))


def test_per_iteration_timing_as_nccl_tests_prints_and_writes_it():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "iter.json")
        code, out, err = run("all_reduce_perf", SMALL + ["-n", "5", "-I", "1", "-K", "1", "-J", path])
        expect(code == 0, "exit %d\n%s\n%s" % (code, out, err))
        log = fmt.parse_log(out, per_iter=True)
        expect(any(n.startswith("Per-Iteration Report:") and "skips first 1 iterations" in n for n in log["notes"]),
               "no Per-Iteration Report line: %r" % log["notes"])
        for row in log["rows"]:
            for placement in ("out_of_place", "in_place"):
                g = row[placement]
                expect(0 < g["i_min"] <= g["i_max"] and g["i_p99"] <= g["i_max"], "i_* %r" % g)
        with open(path) as f:
            doc = json.load(f)
        fmt.check_json(doc)
        expect(doc["config"]["per_iter_timing"] == "true" and doc["config"]["per_iter_skip"] == 1, "config")
        for r in doc["results"]:
            p = r["out_of_place_per_iter"]
            expect(len(p["per_process_max_times_us"]) == 2, "2 process rows, got %d" % len(p["per_process_max_times_us"]))
            # nccl-tests' analyzer checks this too: times_us is the maximum over the process rows.
            expect(p["times_us"] == [max(col) for col in zip(*p["per_process_max_times_us"])], "times_us %r" % p)


def test_wrong_data_exits_7():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "wrong.json")
        code, out, err = run("reduce_scatter_perf", SMALL + ["-c", "1", "--inject-wrong", "1", "-J", path])
        expect(code == 7, "exit %d, nccl-tests exits 7\n%s\n%s" % (code, out, err))
        log = fmt.parse_log(out)
        expect(log["out_of_bounds"] > 0 and log["out_of_bounds_verdict"] == "FAILED", "footer %r" % log)
        expect(all(r["out_of_place"]["wrong"] > 0 for r in log["rows"] if r["count"] > 0), "rows %r" % log["rows"])
        expect(" Test failure " in log["failure_line"], "no nccl-tests failure line: %r" % log["failure_line"])
        with open(path) as f:
            doc = json.load(f)
        fmt.check_json(doc)
        expect(doc["out_of_bounds"]["okay"] == "false", "JSON out_of_bounds %r" % doc["out_of_bounds"])
    # -c 0 checks nothing, so the same spoiling goes unseen: N/A and exit 0.
    code, out, err = run("reduce_scatter_perf", SMALL + ["-c", "0", "--inject-wrong", "1"])
    expect(code == 0, "-c 0: exit %d\n%s" % (code, err))
    expect(all(r["in_place"]["wrong"] is None for r in fmt.parse_log(out)["rows"]), "-c 0 printed a #wrong")


def test_unmeetable_bandwidth_floor_exits_7():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "slow.json")
        code, out, err = run("all_gather_perf", SMALL + ["-J", path], env={"NCCL_TESTS_MIN_BW": "1000000"})
        expect(code == 7, "NCCL_TESTS_MIN_BW: exit %d\n%s\n%s" % (code, out, err))
        log = fmt.parse_log(out)
        expect(log["avg_busbw_verdict"] == "FAILED" and log["out_of_bounds_verdict"] == "OK", "footer %r" % log)
        with open(path) as f:
            doc = json.load(f)
        fmt.check_json(doc)
        expect(doc["average_bus_bandwidth"]["okay"] == "false", "JSON %r" % doc["average_bus_bandwidth"])
    code, out, err = run("kolo-perf", ["allgather"] + SMALL + ["--min-bw", "1000000"])
    expect(code == 7, "--min-bw: exit %d" % code)
    code, out, err = run("all_gather_perf", SMALL, env={"NCCL_TESTS_MIN_BW": "0.000001"})
    expect(code == 0 and fmt.parse_log(out)["avg_busbw_verdict"] == "OK", "a floor that is met: exit %d" % code)


def test_existing_kolo_perf_command_lines_still_work():
    code, out, err = run("kolo-perf", ["allreduce", "-b", "8", "-e", "1K", "-f", "4", "-c", "1", "-n", "2",
                                       "-d", "all", "-o", "all", "--algo", "ring", "-T", "30"])
    expect(code == 0, "exit %d\n%s" % (code, err))
    fmt.parse_log(out)
    code, out, err = run("kolo-perf", ["allreduce", "-Q", "1"])
    expect(code == 2 and "unknown option '-Q'" in err, "bad flag: exit %d, %s" % (code, err))
    for program in ("kolo-perf", "all_reduce_perf"):
        r = subprocess.run([os.path.join(PERF_DIR, program), "--version"], stdout=subprocess.PIPE, text=True, timeout=30)
        expect(r.returncode == 0 and r.stdout.startswith(program + " (kolo) "), "--version: %r" % r.stdout)
        r = subprocess.run([os.path.join(PERF_DIR, program), "-h"], stdout=subprocess.PIPE, text=True, timeout=30)
        expect(r.returncode == 0 and "--output_file" in r.stdout, "-h: exit %d" % r.returncode)
