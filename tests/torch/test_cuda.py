"""kolo_torch on CUDA tensors: 2 ranks sharing one GPU (cuda_worker.py: every collective and
point-to-point operation on device buffers, every element checked; async_op=True, wait() and the
tensor used on the current stream; the future and then(); host and device tensors mixed in one
operation refused), and DDP on the GPU training like one rank with the whole batch
(examples/torch/train.py --device cuda --global-batch).

Skipped where torch.cuda.is_available() is False, or where kolo_torch was compiled without CUDA
(kolo_torch._C.cuda: against a torch without CUDA, e.g. Debian's); KOLO_REQUIRE_CUDA=1 makes
those failures instead (scripts/env/device-check.d/torch_cuda.sh sets it)."""
import json
import os

import pytest
import torch

import cuda_worker
from test_collectives import launch
from test_ddp import check_same_training


def _why_not():
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no GPU, or a torch without CUDA): the CUDA cases need one"
    import kolo_torch
    if not getattr(kolo_torch._C, "cuda", False):
        return "kolo_torch was compiled without CUDA (KOLO_TORCH_CUDA: against a torch without CUDA)"
    return None


WHY_NOT = _why_not()
if WHY_NOT and os.environ.get("KOLO_REQUIRE_CUDA") == "1":
    raise RuntimeError("KOLO_REQUIRE_CUDA=1 but " + WHY_NOT)
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def test_collectives_on_one_gpu(tmp_path):
    size = 2
    codes = launch(cuda_worker.main, size, "file://" + str(tmp_path / "store"), str(tmp_path), timeout=90)
    assert codes == [0] * size, "rank exit codes %s" % codes
    total = 0
    for r in range(size):
        with open(tmp_path / ("%d.json" % r)) as f:
            res = json.load(f)
        assert res["failures"] == [], "\n".join(res["failures"][:40])
        total += res["checks"]
    assert total > 300 * size  # everything really ran (about 370 checks per rank)


def test_ddp_on_one_gpu_matches_one_rank():
    # 2 ranks on one GPU, DDP's buckets all-reduced by kolo on device memory (through the
    # Work's future), against 1 rank with the whole global batch: float32 rounding apart
    # (GEMMs of other shapes sum in other orders), the same losses.
    check_same_training("cuda", 1e-4, timeout=42)
