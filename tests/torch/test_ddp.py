"""torch DDP trains the same over kolo as over gloo: examples/torch/train.py's model, launched
by torchrun with 2 ranks, prints the same loss per step (within 1e-6) for plain DDP, no_sync
gradient accumulation, find_unused_parameters, static_graph, the fp16/bf16 compression hooks
and many small buckets. gloo cannot all-reduce bfloat16 in torch 1.13: its bf16 run uses the
same hook with the sum done in float32 (exact for 2 ranks) and rounded once (ddp_variants.py).
And 2 ranks sharing a global batch train like 1 rank with all of it (test_cuda.py: on a GPU)."""
import json
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, timeout=240, nproc=2):
    cmd = [sys.executable, "-m", "kolo_torch.run", "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1",
           "--master_port", str(free_port())] + args
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    assert p.returncode == 0, "%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout[-4000:])
    return p.stdout


@pytest.fixture(scope="module")
def variant_losses(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    out = {}
    for backend in ("kolo", "gloo"):
        path = str(tmp / (backend + ".json"))
        torchrun([os.path.join(HERE, "ddp_variants.py"), backend, path])
        with open(path) as f:
            out[backend] = json.load(f)
    return out


VARIANTS = ["plain", "no_sync", "find_unused", "static_graph", "fp16_hook", "bf16_hook", "small_buckets"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_losses_as_gloo(variant_losses, variant):
    kolo, gloo = variant_losses["kolo"][variant], variant_losses["gloo"][variant]
    assert len(kolo) == len(gloo) == 3
    for step, (k, g) in enumerate(zip(kolo, gloo)):
        assert abs(k - g) <= 1e-6, "%s step %d: kolo loss %.9f, gloo loss %.9f" % (variant, step, k, g)
    assert kolo[-1] < kolo[0], "%s: the loss did not go down (%s)" % (variant, kolo)


def test_variants_differ(variant_losses):
    # The variants really change training (else the test above could not tell them apart).
    k = variant_losses["kolo"]
    assert k["plain"] != k["no_sync"] and k["plain"] != k["fp16_hook"] and k["fp16_hook"] != k["bf16_hook"]


def test_sparse_embedding_same_as_gloo(tmp_path):
    # nn.Embedding(sparse=True): DDP all-reduces its sparse gradient (kolo's sparse all_reduce);
    # the same losses and trained weights as over gloo, and every rank agrees.
    res = {}
    for backend in ("kolo", "gloo"):
        path = str(tmp_path / (backend + ".json"))
        torchrun([os.path.join(HERE, "ddp_sparse.py"), backend, path])
        with open(path) as f:
            res[backend] = json.load(f)
    k, g = res["kolo"], res["gloo"]
    assert k["ranks_agree"] and g["ranks_agree"]
    for step, (a, b) in enumerate(zip(k["losses"], g["losses"])):
        assert abs(a - b) <= 1e-6, "step %d: kolo loss %.9f, gloo loss %.9f" % (step, a, b)
    assert max(abs(a - b) for a, b in zip(k["weights"], g["weights"])) <= 1e-6
    assert k["losses"][-1] < k["losses"][0], k["losses"]


def test_example_command_line():
    # The example as a user launches it: per-step lines and the final summary, kolo and gloo alike.
    lines = {}
    for backend in ("kolo", "gloo"):
        out = torchrun(["examples/torch/train.py", "--backend", backend, "--steps", "3", "--dim", "32", "--seq", "32"])
        lines[backend] = [l for l in out.splitlines() if l.startswith("step ")]
        assert len(lines[backend]) == 3, out
    assert lines["kolo"] == lines["gloo"]


def global_batch_losses(nproc, device, steps=6, timeout=240):
    """The per-step losses of examples/torch/train.py over kolo with --global-batch 8 (each of
    `nproc` ranks trains on its share of the same draws) on `device`."""
    out = torchrun(["examples/torch/train.py", "--backend", "kolo", "--device", device, "--global-batch", "8",
                    "--steps", str(steps), "--dim", "32", "--seq", "32", "--layers", "2"], nproc=nproc,
                   timeout=timeout)
    losses = [float(l.split()[3]) for l in out.splitlines() if l.startswith("step ")]
    assert len(losses) == steps, out
    return losses


def check_same_training(device, tol, timeout=240):
    one, two = global_batch_losses(1, device, timeout=timeout), global_batch_losses(2, device, timeout=timeout)
    print("ddp %s: max |1 rank - 2 ranks| loss difference %.3g over %d steps (tolerance %g); 1 rank %s; 2 ranks %s"
          % (device, max(abs(a - b) for a, b in zip(one, two)), len(one), tol, one, two))
    for step, (a, b) in enumerate(zip(one, two)):
        assert abs(a - b) <= tol, "%s step %d: 1 rank loss %.9f, 2 ranks %.9f (tolerance %g)" % (device, step, a, b, tol)
    assert two[-1] < two[0], "the loss did not go down (%s)" % two


def test_global_batch_matches_one_rank():
    # DDP's averaged gradients over 2 ranks' halves equal one rank's over the whole batch: the
    # same losses up to float32 rounding (seen: 5e-7).
    check_same_training("cpu", 1e-5)
