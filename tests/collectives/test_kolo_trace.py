"""kolo-trace (tools/kolo-trace/kolo-trace) on dump folders written here, in the format of
src/engine/flight_recorder.cpp: it reads one job's dumps, refuses a folder of several jobs unless
--job picks one, and refuses dumps that claim one job but cannot be one run of it. The dumps the
recorder really writes are checked by tests/collectives/test_flight_recorder.cpp.

pytest; KOLO_TRACE names the kolo-trace to test (meson's test sets it), else the source tree's.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

KOLO_TRACE = os.environ.get("KOLO_TRACE") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tools/kolo-trace/kolo-trace")


class Folder:
    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="kolo-trace-test-")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)

    def dump(self, job, rank, size, world_size=None, group="default", stuck_on=None, last_done=3, pid=None,
             name=None, with_job_fields=True):
        """A rank's dump: all-reduces 0..last_done done, then (stuck_on given) the next one running,
        waiting for rank stuck_on."""
        entries = []
        for seq in range(last_done + 1):
            entries.append({"seq": seq, "op": "allreduce", "bytes": 4096, "root": -1, "algorithm": "ring",
                            "transport": "shm", "state": "done", "waiting_on": -1, "issued_us": 0,
                            "started_us": 1000 + seq, "finished_us": 1001 + seq})
        if stuck_on is not None:
            entries.append({"seq": last_done + 1, "op": "allreduce", "bytes": 4096, "root": -1, "algorithm": "ring",
                            "transport": "shm", "state": "running", "waiting_on": stuck_on, "issued_us": 0,
                            "started_us": 2000, "finished_us": 0})
        d = {"rank": rank, "size": size, "group": group}
        if with_job_fields:
            d.update(job=job, world_size=world_size if world_size is not None else size)
        d.update(pid=pid if pid is not None else 1000 * size + rank, reason="timeout", entries=entries)
        base = name or ("%s%s.rank%d" % (job + "." if job and with_job_fields else "", group, rank))
        with open(os.path.join(self.path, base + ".json"), "w") as f:
            json.dump(d, f)


def run(args):
    r = subprocess.run([sys.executable, KOLO_TRACE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def two_jobs(folder):
    """A 2-rank job (rank 1 stuck) and a 4-rank job whose rank 3 left no dump, in one folder: read
    together they were "3 of 4 ranks" with rank 1 of one job waited for by the other's."""
    folder.dump("jobA", 0, 2, stuck_on=1)
    folder.dump("jobA", 1, 2, last_done=2)
    for r in range(3):
        folder.dump("jobB", r, 4, stuck_on=3)


def test_one_job_is_read_without_being_named():
    with Folder() as f:
        f.dump("a1b2", 0, 3, stuck_on=1)
        f.dump("a1b2", 1, 3, last_done=2)
        f.dump("a1b2", 2, 3, stuck_on=1)
        code, out, err = run([f.path])
        expect(code == 0, "exit %d: %s" % (code, err))
        expect("job a1b2: world of 3 rank(s)" in out, out)
        expect("group default: dumps from 3 of 3 ranks" in out, out)
        expect("verdict: rank 1 is behind: rank(s) 0, 2 waited for it in allreduce #4" in out, out)


def test_a_folder_of_two_jobs_is_refused_listing_them():
    with Folder() as f:
        two_jobs(f)
        code, out, err = run([f.path])
        expect(code == 2, "a mix of two jobs must fail, exit %d\n%s" % (code, out))
        expect("verdict" not in out and "of 4 ranks" not in out, "nothing may be read from a mix:\n" + out)
        expect("holds the dumps of 2 jobs" in err and "--job ID" in err, err)
        expect("--job jobA" in err and "world of 2 rank(s)" in err, err)
        expect("--job jobB" in err and "world of 4 rank(s)" in err and "group default: rank(s) 0, 1, 2" in err, err)


def test_job_picks_one_of_them():
    with Folder() as f:
        two_jobs(f)
        code, out, err = run(["--job", "jobA", f.path])
        expect(code == 0, "exit %d: %s" % (code, err))
        expect("group default: dumps from 2 of 2 ranks" in out, out)
        expect("verdict: rank 1 is behind: rank(s) 0 waited for it" in out, out)
        code, out, err = run(["--job=jobB", f.path])
        expect(code == 0, "exit %d: %s" % (code, err))
        expect("group default: dumps from 3 of 4 ranks; none from rank(s) 3" in out, out)
        expect("verdict: rank 3 is behind: rank(s) 0, 1, 2 waited for it" in out, out)
        code, out, err = run(["--json", "--job", "jobB", f.path])
        expect(code == 0, "exit %d: %s" % (code, err))
        verdicts = json.loads(out)
        expect(len(verdicts) == 1 and verdicts[0]["job"] == "jobB" and verdicts[0]["behind"] == 3, out)


def test_an_unknown_job_is_refused_listing_the_jobs_there():
    with Folder() as f:
        two_jobs(f)
        code, out, err = run(["--job", "jobC", f.path])
        expect(code == 2, "exit %d" % code)
        expect("no dumps of job jobC" in err and "--job jobA" in err and "--job jobB" in err, err)


def test_dumps_of_one_job_id_from_two_runs_are_refused():
    # The same id for two runs (e.g. the same MASTER_ADDR:MASTER_PORT): a 4-rank run's ranks 2
    # and 3 left, a 2-rank run overwrote ranks 0 and 1.
    with Folder() as f:
        f.dump("master-127.0.0.1-29500", 0, 2, stuck_on=1)
        f.dump("master-127.0.0.1-29500", 1, 2)
        f.dump("master-127.0.0.1-29500", 2, 4, stuck_on=0)
        f.dump("master-127.0.0.1-29500", 3, 4, stuck_on=0)
        code, out, err = run([f.path])
        expect(code == 2, "exit %d\n%s" % (code, out))
        expect("do not fit one run" in err and "world sizes 2" in err and "group default of sizes 2, 4" in err, err)
    # One rank dumped by two processes (two folders read together).
    with Folder() as f, Folder() as g:
        f.dump("j", 0, 2, pid=11)
        f.dump("j", 1, 2, pid=12)
        g.dump("j", 1, 2, pid=13)
        code, out, err = run([f.path, g.path])
        expect(code == 2 and "rank 1 of group default dumped by two processes" in err, "exit %d: %s" % (code, err))


def test_dumps_without_a_job_id_are_a_job_of_their_own():
    with Folder() as f:
        f.dump("", 0, 2, stuck_on=1, with_job_fields=False)  # an older kolo's default.rank0.json
        f.dump("", 1, 2, with_job_fields=False)
        f.dump("new", 0, 1)
        code, out, err = run([f.path])
        expect(code == 2 and "--job ''" in err and "--job new" in err, "exit %d: %s" % (code, err))
        code, out, err = run(["--job", "", f.path])
        expect(code == 0 and "group default: dumps from 2 of 2 ranks" in out, "exit %d: %s%s" % (code, out, err))


def test_subgroups_of_one_job_are_read_together():
    with Folder() as f:
        for r in range(4):
            f.dump("j4", r, 4, stuck_on=None if r == 2 else 2)
        for r in range(2):
            f.dump("j4", r, 2, world_size=4, group="default_split0_color0", stuck_on=1 - r if r else None)
        code, out, err = run([f.path])
        expect(code == 0, "exit %d: %s" % (code, err))
        expect("group default: dumps from 4 of 4 ranks" in out, out)
        expect("group default_split0_color0: dumps from 2 of 2 ranks" in out, out)


def test_no_dumps_and_bad_options():
    with Folder() as f:
        code, out, err = run([f.path])
        expect(code == 1 and "no flight-recorder dumps found" in out, "exit %d: %s" % (code, out))
        code, out, err = run(["--frobnicate", f.path])
        expect(code == 2, "exit %d" % code)
        code, out, err = run(["--help"])
        expect(code == 0 and "--job ID" in out and "--json" in out, out)
