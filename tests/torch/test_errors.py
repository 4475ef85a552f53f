"""A killed rank makes every survivor's next collective raise RuntimeError with kolo's message
(the dead rank, the collective, its sequence number), within the group timeout."""
import json

import errors_worker
from test_collectives import launch


def test_killed_rank_raises_in_every_survivor(tmp_path):
    size = 3
    codes = launch(errors_worker.main, size, "file://" + str(tmp_path / "store"), str(tmp_path), timeout=180)
    assert codes == [0, 0, 3], "exit codes %s" % codes
    for r in range(size - 1):
        with open(tmp_path / ("%d.json" % r)) as f:
            res = json.load(f)
        msg = res["error"]
        assert msg is not None, "rank %d: no error after rank %d died" % (r, size - 1)
        assert "rank %d" % (size - 1) in msg, "rank %d: the message does not name the dead rank: %s" % (r, msg)
        assert "allreduce" in msg and "#" in msg, "rank %d: no collective/sequence number: %s" % (r, msg)
        assert res["seconds"] < errors_worker.TIMEOUT_S, "rank %d: took %.1f s" % (r, res["seconds"])
