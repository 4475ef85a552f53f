"""torch's new_group over kolo with KOLO_SPLIT_SHARE=1: the subgroups run on the world's
connections (no new socket in any rank) and their collectives and point-to-point operations,
interleaved with world all-reduces, give the right values (split_share_worker.py). With
KOLO_SPLIT_SHARE=0 the same subgroups connect anew, which the socket count sees."""
import json

import pytest

import split_share_worker
from test_collectives import free_port, launch


def run(tmp_path, size, share):
    init = "tcp://127.0.0.1:%d" % free_port()
    env = {"KOLO_SPLIT_SHARE": share, "KOLO_TRANSPORT": "tcp"}
    codes = launch(split_share_worker.main, size, init, str(tmp_path), timeout=120, env=env)
    assert codes == [0] * size, "rank exit codes %s" % codes
    results = []
    for r in range(size):
        with open(tmp_path / ("%d.json" % r)) as f:
            results.append(json.load(f))
    for res in results:
        assert res["failures"] == [], "\n".join(res["failures"][:20])
        assert res["checks"] >= 5 * 4
    return [res["sockets_grown"] for res in results]


@pytest.mark.parametrize("size", [4])
def test_shared_subgroups_open_no_socket(tmp_path, size):
    assert run(tmp_path, size, "1") == [0] * size


@pytest.mark.parametrize("size", [4])
def test_ordinary_subgroups_connect(tmp_path, size):
    # Each of the two kolo groups of a 2-rank subgroup connects its pair (and listens).
    assert all(g >= 2 for g in run(tmp_path, size, "0"))
