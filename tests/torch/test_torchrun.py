"""torchrun launches plain kolo programs: kolo-perf (check mode: every element verified) and
kolo-train, at 2 and 4 ranks, on one node and as two nodes (two torchrun agents on this host,
--nnodes 2 --node_rank 0/1) with the static and the c10d rendezvous.

Under the static rendezvous torchrun's agent hosts a c10d TCPStore on MASTER_PORT and sets
TORCHELASTIC_USE_AGENT_STORE: every kolo rank must join it as a client, in c10d's protocol. Under
c10d's rendezvous kolo's rank 0 hosts the store itself. Launched through kolo_torch.run (torchrun
with the Std.from_str fix that Debian's torch 1.13 needs on Python 3.11).
"""
import os
import re
import socket
import subprocess
import sys

import pytest

PERF = os.environ.get("KOLO_PERF_EXE")
TRAIN = os.environ.get("KOLO_TRAIN_EXE")
TIMEOUT_S = 240


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, program, cwd):
    return subprocess.Popen([sys.executable, "-m", "kolo_torch.run"] + args + ["--no_python"] + program,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", cwd=cwd)


def finish(procs):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            pytest.fail("torchrun hung:\n" + out)
        outs.append(out)
        assert p.returncode == 0, "torchrun exited %d:\n%s" % (p.returncode, out)
    return outs


def check_perf_output(out, ranks):
    # The rank lines (one per rank, printed by rank 0) and a fully checked sweep.
    assert len(re.findall(r"^#\s+Rank\s+\d+ ", out, re.M)) == ranks, out
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+float\s+sum\s+-?\d+\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\S+\s+\S+\s+\S+\s+(\d+)\s*$",
                      out, re.M)
    assert len(rows) >= 3, "no result rows:\n" + out
    for size, count, wrong_oop, wrong_ip in rows:
        assert int(wrong_oop) == 0 and int(wrong_ip) == 0, "wrong elements at %s bytes:\n%s" % (size, out)
    assert "Out of bounds values : 0 OK" in out, out


PERF_ARGS = ["allreduce", "-b", "8", "-e", "256K", "-f", "8", "-c", "1", "-n", "5", "-w", "1"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_kolo_perf_on_one_node_joins_the_agent_store(ranks, tmp_path):
    out, = finish([torchrun(["--nproc_per_node", str(ranks), "--master_port", str(free_port())],
                            [PERF] + PERF_ARGS, tmp_path)])
    check_perf_output(out, ranks)


@pytest.mark.parametrize("ranks", [2, 4])
def test_kolo_train_on_one_node(ranks, tmp_path):
    out, = finish([torchrun(["--nproc_per_node", str(ranks), "--master_port", str(free_port())],
                            [TRAIN, "--steps", "3", "--eval-every", "0", "--eval-samples", "4", "--ckpt",
                             str(tmp_path / "ckpt")], tmp_path)])
    assert "%d ranks" % ranks in out, out
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)", out, re.M)]
    assert len(losses) == 3, out
    assert losses[-1] < losses[0], "the loss did not fall: %s" % losses


@pytest.mark.parametrize("rdzv", ["static", "c10d"])
def test_kolo_perf_on_two_nodes(rdzv, tmp_path):
    port = free_port()
    if rdzv == "static":
        common = ["--master_addr", "127.0.0.1", "--master_port", str(port)]
    else:
        common = ["--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id",
                  "kolo-test-%d" % port]
    procs = [torchrun(["--nnodes", "2", "--node_rank", str(n), "--nproc_per_node", "2"] + common,
                      [PERF] + PERF_ARGS, tmp_path) for n in range(2)]
    outs = finish(procs)
    check_perf_output("\n".join(outs), 4)
