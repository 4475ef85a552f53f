"""kolo_torch.shrink under torch.distributed. DDP survives a killed rank: examples/torch/elastic_ddp.py launched by `kolorun --elastic` at 4
ranks on CPU; the test SIGKILLs one rank (victim and step drawn from a printed seed; rank 0, whose
death the store kolorun hosts survives, among them) and checks that every other rank shrinks its
group, finishes, and ends with the same parameters as the others, bit for bit, and close to a
one-process run of the same training (the example's --reference). Every wait is bounded.

Seed: KOLO_TEST_SEED, else drawn and printed. And the named form at 3 ranks (shrink_worker.py):
through torch.distributed.shrink_group and kolo's Backend hook where torch has it (2.14), else
kolo_torch's own registration.

Growing back (kolo_torch.grow / kolo_torch.join): the same run under `kolorun --replace 1` with
the example's --grow, where the killed rank's replacement joins and all four finish with the
reference's parameters; grow with nobody waiting (None, at once) and a joiner checked end to end
at 2 ranks (grow_worker.py); a joiner nobody admits times out. Runtime about 30-50 s on 2 cores.
"""
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "torch", "elastic_ddp.py")
KOLORUN = os.environ.get("KOLORUN_EXE", os.path.join(ROOT, "build", "tools", "kolorun", "kolorun"))
RANKS = 4
STEPS = 30
DEADLINE_S = 120  # the whole job, kill included (10-20 s unloaded); kolorun's own --timeout is shorter


def build_python():
    return os.environ.get("KOLO_BUILD_PYTHON", os.path.join(ROOT, "build", "python"))


def read_lines(stream, lines):
    for line in iter(stream.readline, ""):
        lines.put(line)
    lines.put(None)


@pytest.fixture
def seed():
    s = int(os.environ.get("KOLO_TEST_SEED", random.randrange(1 << 30)))
    print("KOLO_TEST_SEED=%d" % s)
    return s


def run_and_kill(cmd, victim, kill_after, seed):
    """Runs the kolorun command `cmd`, SIGKILLs rank `victim` once it printed step `kill_after`
    and returns the whole output once kolorun exited (every wait bounded by DEADLINE_S)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    lines = queue.Queue()
    threading.Thread(target=read_lines, args=(proc.stdout, lines), daemon=True).start()
    log, pids, killed = [], {}, False
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail("the job did not finish in %d s (seed %d):\n%s" % (DEADLINE_S, seed, "".join(log)))
            if line is None:
                break
            log.append(line)
            m = re.match(r"rank (\d+) pid (\d+)$", line.strip())
            if m:
                pids[int(m.group(1))] = int(m.group(2))
            if not killed and line.strip().startswith("rank %d step %d " % (victim, kill_after)):
                try:
                    os.kill(pids[victim], signal.SIGKILL)
                except ProcessLookupError:
                    pytest.fail("rank %d ended before the kill (seed %d):\n%s" % (victim, seed, "".join(log)))
                killed = True
        rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.terminate()  # kolorun forwards it to every rank
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = "".join(log)
    assert killed, "rank %d never reported step %d (seed %d):\n%s" % (victim, kill_after, seed, text)
    assert rc == 0, "kolorun --elastic exited %d (seed %d):\n%s" % (rc, seed, text)
    return text


def check_against_reference(out, names, seed):
    """The saved final parameters OUT/<name>.pt against the same training in one process: equal
    up to the rounding of the sums' order."""
    ref = subprocess.run([sys.executable, EXAMPLE, "--reference", "--steps", str(STEPS), "--out", out],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert ref.returncode == 0, ref.stdout
    expect = torch.load(os.path.join(out, "reference.pt"))
    for name in names:
        got = torch.load(os.path.join(out, "%s.pt" % name))
        for i, (g, e) in enumerate(zip(got, expect)):
            assert torch.allclose(g, e, rtol=1e-4, atol=1e-5), \
                "%s parameter %d differs from the one-process run by %.3g (seed %d)" % (
                    name, i, (g - e).abs().max().item(), seed)


def example_cmd(out, extra_kolorun=(), extra_example=()):
    return [KOLORUN, "--elastic", *extra_kolorun, "-n", str(RANKS), "--timeout", str(DEADLINE_S - 10),
            "-x", "KOLO_STORE_AUTH=off", "-x", "PYTHONPATH=" + build_python(),
            sys.executable, EXAMPLE, "--steps", str(STEPS), "--out", out, "--timeout", "20", "--shrink-timeout", "10",
            *extra_example]


def test_survivors_finish_with_the_same_parameters(tmp_path, seed):
    if not os.access(KOLORUN, os.X_OK):
        pytest.skip("kolorun not built at %s (KOLORUN_EXE)" % KOLORUN)
    rng = random.Random(seed)
    victim = rng.randrange(RANKS)
    kill_after = rng.randint(3, STEPS - 8)  # completed steps of the victim before the kill
    print("victim rank %d, killed after its step %d" % (victim, kill_after))
    out = str(tmp_path)
    text = run_and_kill(example_cmd(out), victim, kill_after, seed)

    survivors = [r for r in range(RANKS) if r != victim]
    for r in survivors:
        assert re.search(r"^rank %d shrunk: now rank \d+ of %d" % (r, RANKS - 1), text, re.M), \
            "rank %d did not shrink to %d ranks (seed %d):\n%s" % (r, RANKS - 1, seed, text)
        assert re.search(r"^rank %d step %d world %d " % (r, STEPS, RANKS - 1), text, re.M), \
            "rank %d did not finish step %d with %d ranks (seed %d):\n%s" % (r, STEPS, RANKS - 1, seed, text)
    assert not re.search(r"^rank %d final" % victim, text, re.M), "the killed rank finished:\n" + text
    digests = {r: re.search(r"^rank %d final (\w+)" % r, text, re.M).group(1) for r in survivors}
    assert len(set(digests.values())) == 1, "survivors differ (seed %d): %s\n%s" % (seed, digests, text)
    check_against_reference(out, ["rank%d" % r for r in survivors], seed)


def test_replacement_joins_and_finishes_at_full_world(tmp_path, seed):
    """kolorun --replace 1 starts the killed rank's replacement (KOLO_JOIN=1): it enters through
    kolo_torch.join, the survivors' kolo_torch.grow lets it in at the first step boundary after
    their shrink, rank 0 hands it the state, and all four finish with the same parameters as the
    one-process run."""
    if not os.access(KOLORUN, os.X_OK):
        pytest.skip("kolorun not built at %s (KOLORUN_EXE)" % KOLORUN)
    rng = random.Random(seed)
    victim = rng.randrange(RANKS)
    kill_after = rng.randint(3, STEPS - 12)  # room for the joiner to train a few steps with the others
    print("victim rank %d, killed after its step %d; kolorun --replace 1" % (victim, kill_after))
    out = str(tmp_path)
    text = run_and_kill(example_cmd(out, ["--replace", "1"], ["--grow", "--grow-wait", "30"]), victim, kill_after, seed)

    joined = re.search(r"^replacement %d joined: now rank %d of %d at step (\d+)$" % (victim, RANKS - 1, RANKS),
                       text, re.M)
    assert joined, "the replacement of rank %d did not join as rank %d of %d (seed %d):\n%s" % (
        victim, RANKS - 1, RANKS, seed, text)
    at = int(joined.group(1))
    survivors = [r for r in range(RANKS) if r != victim]
    for r in survivors:
        assert re.search(r"^rank %d shrunk: now rank \d+ of %d" % (r, RANKS - 1), text, re.M), \
            "rank %d did not shrink to %d ranks (seed %d):\n%s" % (r, RANKS - 1, seed, text)
        assert re.search(r"^rank %d grew: now rank \d+ of %d at step %d$" % (r, RANKS, at), text, re.M), \
            "rank %d did not grow back to %d ranks at step %d (seed %d):\n%s" % (r, RANKS, at, seed, text)
    who = ["rank %d" % r for r in survivors] + ["replacement %d" % victim]
    for w in who:
        assert re.search(r"^%s step %d world %d " % (w, STEPS, RANKS), text, re.M), \
            "%s did not finish step %d with %d ranks (seed %d):\n%s" % (w, STEPS, RANKS, seed, text)
    assert not re.search(r"^rank %d final" % victim, text, re.M), "the killed rank finished:\n" + text
    digests = {w: re.search(r"^%s final (\w+)" % w, text, re.M).group(1) for w in who}
    assert len(set(digests.values())) == 1, "the ranks differ (seed %d): %s\n%s" % (seed, digests, text)
    check_against_reference(out, [w.replace(" ", "") for w in who], seed)


def test_grow_with_nobody_waiting_then_with_a_joiner():
    """grow_worker.py at 2 ranks: with nobody waiting kolo_torch.grow is None at once (and after
    its wait); then a process started with KOLO_JOIN=1 joins through kolo_torch.join and the
    grown default group of 3 serves collectives, point-to-point, a later subgroup and DDP."""
    if not os.access(KOLORUN, os.X_OK):
        pytest.skip("kolorun not built at %s (KOLORUN_EXE)" % KOLORUN)
    cmd = [KOLORUN, "-n", "2", "--timeout", "100", "-x", "KOLO_STORE_AUTH=off", "-x", "PYTHONPATH=" + build_python(),
           sys.executable, os.path.join(HERE, "grow_worker.py")]
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0, "%s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout)
    for r in (0, 1):
        none = re.search(r"^rank %d none in ([\d.]+) s$" % r, p.stdout, re.M)
        assert none and float(none.group(1)) < 1.0, "grow with nobody waiting was not quick:\n" + p.stdout
        waited = re.search(r"^rank %d waited ([\d.]+) s$" % r, p.stdout, re.M)
        assert waited and 0.3 <= float(waited.group(1)) < 5, "grow(wait=0.3) did not wait 0.3 s:\n" + p.stdout
        assert re.search(r"^rank %d grown ok$" % r, p.stdout, re.M), p.stdout
    assert re.search(r"^joiner grown ok$", p.stdout, re.M), p.stdout


def test_join_nobody_admits_times_out(tmp_path):
    """A joiner nobody lets in gets, after its wait, an error naming the group, and no hang."""
    from datetime import timedelta
    import torch.distributed as dist
    try:  # torch 2.x built without libuv (Debian's) asks for it unless told not to
        server = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=30), use_libuv=False)
    except TypeError:  # torch 1.13: no libuv, no such argument
        server = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=30))
    code = ("import time, kolo_torch\n"
            "t = time.monotonic()\n"
            "try:\n"
            "    kolo_torch.join(timeout=10, wait=1)\n"
            "except RuntimeError as e:\n"
            "    print('refused after %.1f s: %s' % (time.monotonic() - t, str(e).splitlines()[0]))\n")
    env = dict(os.environ, PYTHONPATH=build_python(), KOLO_STORE_ADDR="127.0.0.1:%d" % server.port,
               KOLO_STORE_AUTH="off")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60, env=env)
    m = re.search(r"^refused after ([\d.]+) s: (.*)$", p.stdout, re.M)
    assert m, p.stdout
    assert 1.0 <= float(m.group(1)) < 10, p.stdout
    assert "join of group torch" in m.group(2) and "timed out" in m.group(2), p.stdout


def test_named_shrink_serves_collectives():
    if not os.access(KOLORUN, os.X_OK):
        pytest.skip("kolorun not built at %s (KOLORUN_EXE)" % KOLORUN)
    cmd = [KOLORUN, "-n", "3", "--timeout", "100", "-x", "KOLO_STORE_AUTH=off", "-x", "KOLO_SPLIT_SHARE=1",
           "-x", "PYTHONPATH=" + build_python(),
           sys.executable, os.path.join(HERE, "shrink_worker.py")]
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0, "%s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout)
    path = "hook" if _torch_has_shrink_hook() else "kolo"
    for r in (0, 1):
        assert re.search(r"^rank %d path %s ok$" % (r, path), p.stdout, re.M), p.stdout
    assert re.search(r"^rank 2 refused: .*exclu", p.stdout, re.M), p.stdout


def _torch_has_shrink_hook():
    """Whether kolo_torch was built with torch's Backend shrink hook (torch 2.14's headers)."""
    q = subprocess.run([sys.executable, "-c", "import kolo_torch, torch.distributed as d; "
                        "print(int(kolo_torch._C.backend_shrink_hook and hasattr(d, 'shrink_group')))"],
                       stdout=subprocess.PIPE, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=build_python()))
    return q.stdout.strip() == "1"
