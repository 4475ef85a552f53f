"""Every torch.distributed operation x dtype x reduce op over kolo, at 2, 3 and 4 ranks, checked
against references and against gloo in the same processes (collectives_worker.py), with each
world size initialized through a different init method (file://, tcp://, env://)."""
import json
import os
import socket

import pytest
import torch.multiprocessing as mp

import collectives_worker


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(target, size, init_method, out_dir, timeout=300, env=None):
    """Starts `size` spawned ranks running target(rank, size, init_method, out_dir); returns exit codes."""
    ctx = mp.get_context("spawn")
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        procs = [ctx.Process(target=target, args=(r, size, init_method, out_dir)) for r in range(size)]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(old)
    for p in procs:
        p.join(timeout)
    codes = []
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
        codes.append(p.exitcode)
    return codes


@pytest.mark.parametrize("size,method", [(2, "file"), (3, "tcp"), (4, "env")])
def test_matrix_against_gloo(tmp_path, size, method):
    port = free_port()
    init = {"file": "file://" + str(tmp_path / "store"), "tcp": "tcp://127.0.0.1:%d" % port, "env": "env://"}[method]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)} if method == "env" else {}
    codes = launch(collectives_worker.main, size, init, str(tmp_path), env=env)
    assert codes == [0] * size, "rank exit codes %s" % codes
    total = 0
    for r in range(size):
        with open(tmp_path / ("%d.json" % r)) as f:
            res = json.load(f)
        assert res["failures"] == [], "\n".join(res["failures"][:40])
        total += res["checks"]
    assert total > 300 * size  # the matrix really ran
