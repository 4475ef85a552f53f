"""FSDP2 and DTensor over kolo, against gloo in the same processes (fsdp2_worker.py); torch >=
2.4 (FSDP2's fully_shard, DeviceMesh.from_group), so skipped under Debian 12's torch 1.13 (CI):
run by hand in scripts/env/torch2-chroot.sh. examples/torch/train.py's GPT under fully_shard
trains 20 steps with 2 and 4 ranks to the same losses over kolo as over gloo (relative 1e-5 in
float32; 1e-2 with bfloat16 parameters), and DTensor redistributions (shard, replicate, shard
to shard, partial sum/avg) give the full tensor's slices on both. FSDP2 reaches kolo through
all_gather_into_tensor and reduce_scatter_tensor (their coalesced forms when it groups
parameters) with ReduceOp.AVG, DTensor through all-gathers and all_reduce; the coalesced forms
(mixed dtypes in one list), PREMUL_SUM and all_to_all_single are checked directly. ~1 min each
at 2 ranks, ~2 min at 4 ranks on 2 cores."""
import json

import pytest
import torch

from test_collectives import free_port, launch

TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
pytestmark = pytest.mark.skipif(TORCH < (2, 4), reason="FSDP2 (fully_shard) and DeviceMesh.from_group need "
                                "torch >= 2.4; this is %s (run under scripts/env/torch2-chroot.sh)" % torch.__version__)


@pytest.mark.parametrize("size,variant,tol", [(2, "fp32", 1e-5), (4, "fp32", 1e-5), (2, "bf16", 1e-2),
                                              (4, "bf16", 1e-2)])
def test_fsdp2_and_dtensor_match_gloo(tmp_path, size, variant, tol):
    import fsdp2_worker
    codes = launch(fsdp2_worker.main, size, "tcp://127.0.0.1:%d" % free_port(), str(tmp_path), timeout=600,
                   env={"FSDP2_VARIANT": variant})
    assert codes == [0] * size, "rank exit codes %s" % codes
    res = [json.load(open(tmp_path / ("%d.json" % r))) for r in range(size)]
    kolo, gloo = res[0]["losses"]["kolo"], res[0]["losses"]["gloo"]
    assert len(kolo) == len(gloo) == fsdp2_worker.STEPS
    worst = max(abs(k - g) / abs(g) for k, g in zip(kolo, gloo))
    print("fsdp2 %s %d ranks: max relative loss difference kolo/gloo %.3g; kolo %s; gloo %s; calls %s; ops %s"
          % (variant, size, worst, kolo, gloo, res[0]["calls"], res[0]["reduce_ops"]))
    for step, (k, g) in enumerate(zip(kolo, gloo)):
        assert abs(k - g) <= tol * abs(g), "step %d: kolo loss %.9f, gloo loss %.9f" % (step, k, g)
    assert kolo[-1] < kolo[0], "the loss did not go down: %s" % kolo
    for r in range(size):
        assert res[r]["coalesced"] == [], res[r]["coalesced"]
        assert res[r]["dtensor"]["kolo"] == [], res[r]["dtensor"]["kolo"]
        assert res[r]["dtensor"]["gloo"] == [], res[r]["dtensor"]["gloo"]
    calls = res[0]["calls"]
    assert calls.get("all_gather_into_tensor", 0) + calls.get("all_gather_single", 0) > 0, calls
    assert calls.get("reduce_scatter_tensor", 0) + calls.get("reduce_scatter_single", 0) > 0, calls
