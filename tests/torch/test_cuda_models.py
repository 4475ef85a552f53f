"""Models trained over kolo by 2 ranks, each on half of a global batch, match the same model
trained by one process on the whole batch (models_worker.py; both in the same processes):

- FSDP2 (fully_shard) of examples/torch/train.py's GPT: losses per step and every parameter at
  the end. On CUDA (2 ranks sharing the GPU) and on the CPU; torch >= 2.4.
- torch.nn.SyncBatchNorm.convert_sync_batchnorm of a small conv net under DDP on CUDA: losses,
  and every parameter and BatchNorm buffer (running_mean, running_var, num_batches_tracked) at
  the end equal plain BatchNorm's over the whole batch: SyncBatchNorm's statistics are the
  global batch's. The same net with plain BatchNorm under DDP (each rank its own statistics)
  must differ, which shows the comparison can fail: rank 1's half is drawn from another
  distribution. torch runs SyncBatchNorm on GPUs only, so the CPU test uses a stand-in that
  gathers every rank's input over kolo (models_worker.GatheredBatchNorm2d); it runs in CI.

The CUDA tests skip as test_cuda.py's do (no GPU, or kolo_torch built without CUDA), and fail
instead under KOLO_REQUIRE_CUDA=1 (scripts/env/device-check.d/torch_cuda.sh sets it). Time on
2 CPU cores: fsdp2 cpu ~30 s (torch 2.14), gathered batchnorm ~8 s (torch 1.13, CI)."""
import json

import pytest
import torch

from test_collectives import free_port, launch
from test_cuda import WHY_NOT

TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
needs_cuda = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
needs_fsdp2 = pytest.mark.skipif(TORCH < (2, 4), reason="FSDP2 (fully_shard) and DeviceMesh.from_group need torch "
                                 ">= 2.4; this is %s (run under scripts/env/torch2-chroot.sh)" % torch.__version__)

# float32, 2 ranks against 1 process: the same arithmetic in another order (GEMMs and
# convolutions over half the rows, gradients averaged from two halves, statistics combined
# from two halves), so the results differ by a few float32 roundings (~1e-7 relative) per
# step, which the 6 steps compound (AdamW divides by the root of tiny second moments). The
# tolerances are far above that and far below what a wrong gradient or statistic gives: the
# plain BatchNorm run below differs by more than 1e-2.
LOSS_RTOL = 1e-4
STATE_RTOL, STATE_ATOL = 1e-4, 1e-5


def run(case, device, tmp_path, timeout):
    import models_worker
    size = 2
    codes = launch(models_worker.main, size, "tcp://127.0.0.1:%d" % free_port(), str(tmp_path), timeout=timeout,
                   env={"MODELS_CASE": case, "MODELS_DEVICE": device, "MODELS_DUMP_AFTER": str(timeout - 10)})
    assert codes == [0] * size, "rank exit codes %s" % codes
    res = [json.load(open(tmp_path / ("%d.json" % r))) for r in range(size)]
    return res, models_worker.STEPS


def worst_state(a, b):
    """The largest |a - b| / (STATE_ATOL + STATE_RTOL |b|) over every element of every tensor, and where."""
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    worst = (0.0, None)
    for name in b:
        assert len(a[name]) == len(b[name]), name
        for i, (x, y) in enumerate(zip(a[name], b[name])):
            r = abs(x - y) / (STATE_ATOL + STATE_RTOL * abs(y))
            if r > worst[0]:
                worst = (r, "%s[%d]: %.9g vs %.9g" % (name, i, x, y))
    return worst


def loss_diff(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def check_same(res, run_name, steps, label):
    """Every rank's run `run_name` against the reference: the losses, every state element."""
    ref = res[0]["reference"]
    assert len(ref["losses"]) == steps
    for r, out in enumerate(res):
        # Every rank trained the same reference (the data and the initial weights agree), up to
        # the GPU's nondeterministic reductions (atomics in some backward kernels).
        assert loss_diff(out["reference"]["losses"], ref["losses"]) <= LOSS_RTOL, (r, out["reference"]["losses"])
        assert worst_state(out["reference"]["state"], ref["state"])[0] <= 1.0, "rank %d's reference differs" % r
        got = out[run_name]
        worst_loss = loss_diff(got["losses"], ref["losses"])
        worst, where = worst_state(got["state"], ref["state"])
        print("%s rank %d: losses within %.3g relative (tolerance %g), state elements within %.3g of their "
              "tolerance (worst %s); losses %s; reference %s" % (label, r, worst_loss, LOSS_RTOL, worst, where,
                                                                 got["losses"], ref["losses"]))
        for step, (a, b) in enumerate(zip(got["losses"], ref["losses"])):
            assert abs(a - b) <= LOSS_RTOL * abs(b), "%s step %d: 2 ranks loss %.9f, 1 process %.9f" % (label, step, a, b)
        assert worst <= 1.0, "%s rank %d: state differs beyond rtol %g atol %g at %s" % (label, r, STATE_RTOL,
                                                                                        STATE_ATOL, where)
    assert ref["losses"][-1] < ref["losses"][0], "the loss did not go down: %s" % ref["losses"]


def check_fsdp2(device, tmp_path, timeout):
    res, steps = run("fsdp2", device, tmp_path, timeout)
    check_same(res, "fsdp2", steps, "fsdp2 " + device)


def check_batchnorm(case, device, tmp_path, timeout):
    res, steps = run(case, device, tmp_path, timeout)
    check_same(res, case, steps, "%s %s" % (case, device))
    # Plain BatchNorm under DDP (each rank its own half's statistics) must not match: the loss
    # of the first step already differs, and so do the running statistics.
    ref, local = res[0]["reference"], res[0]["local"]
    worst_loss = loss_diff(local["losses"], ref["losses"])
    worst, where = worst_state(local["state"], ref["state"])
    print("%s %s: plain BatchNorm on 2 ranks differs (as it must): losses by %.3g relative, state elements by up "
          "to %.3g times their tolerance (%s)" % (case, device, worst_loss, worst, where))
    assert worst_loss > 100 * LOSS_RTOL, "plain BatchNorm on 2 ranks trained like 1 process: %s" % local["losses"]
    for name in ("features.1.running_mean", "features.1.running_var"):
        d = max(abs(a - b) for a, b in zip(local["state"][name], ref["state"][name]))
        assert d > 100 * STATE_ATOL, "plain BatchNorm's %s on rank 0 equals the whole batch's (%g)" % (name, d)


@needs_cuda
@needs_fsdp2
def test_fsdp2_on_one_gpu_matches_one_process(tmp_path):
    check_fsdp2("cuda", tmp_path, 60)


@needs_fsdp2
def test_fsdp2_on_cpu_matches_one_process(tmp_path):
    check_fsdp2("cpu", tmp_path, 400)  # 30 s idle; 4 min seen on 2 cores loaded 10x


@needs_cuda
def test_sync_batchnorm_on_one_gpu_matches_one_process(tmp_path):
    check_batchnorm("syncbn", "cuda", tmp_path, 60)


def test_gathered_batchnorm_on_cpu_matches_one_process(tmp_path):
    check_batchnorm("gatheredbn", "cpu", tmp_path, 300)
