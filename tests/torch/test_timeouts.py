"""Timeouts as c10d's backends report them: every collective (barrier included), a point-to-point
receive and Work.wait(timeout) that run past their timeout raise RuntimeError whose text says
"Timed out" (as gloo and NCCL say it: code and users match on it), within a few seconds of the
timeout; a monitored barrier passes when all ranks come and otherwise names on rank 0 the first
rank (every rank with wait_all_ranks) that did not (timeouts_worker.py). ~25 s."""
import json

import timeouts_worker
from test_collectives import launch

SIZE = 3


def results(tmp_path):
    codes = launch(timeouts_worker.main, SIZE, "file://" + str(tmp_path / "store"), str(tmp_path), timeout=240)
    assert codes == [0] * SIZE, "exit codes %s" % codes
    out = []
    for r in range(SIZE):
        with open(tmp_path / ("%d.json" % r)) as f:
            out.append(json.load(f))
    return out


def test_timeouts_say_timed_out(tmp_path):
    res = results(tmp_path)
    r0 = res[0]
    names = list(timeouts_worker.collectives(SIZE)) + ["Work.wait(timeout)"]
    for name in names:
        msg = r0["errors"].get(name)
        assert msg is not None, "%s: no error although no other rank took part" % name
        assert "Timed out" in msg, "%s: the error does not say 'Timed out': %s" % (name, msg)
        assert r0["seconds"][name] < timeouts_worker.TIMEOUT_S + 10, "%s: took %.1f s" % (name, r0["seconds"][name])
    # The monitored barrier every rank came to passed everywhere.
    for r in range(SIZE):
        assert res[r]["errors"]["monitored_barrier all present"] is None, res[r]["errors"]
    one = r0["errors"]["monitored_barrier one missing"]
    assert one is not None and "Rank 1 failed to pass monitoredBarrier" in one, one
    assert "Timed out" in (res[2]["errors"]["monitored_barrier one missing"] or ""), res[2]["errors"]
    every = r0["errors"]["monitored_barrier all missing"]
    assert every is not None and "Ranks 1, 2 failed to pass monitoredBarrier" in every, every
