"""Launched by torchrun: DDP over a model with a sparse embedding (nn.Embedding(sparse=True):
its gradient is a sparse COO tensor, which DDP all-reduces as such) on one backend; rank 0
writes the per-step losses and a checksum of the trained embedding as JSON to the file named by
the last argument.

usage: ddp_sparse.py BACKEND OUT.json
"""
import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 8, sparse=True)
        self.out = nn.Linear(8, 1)

    def forward(self, idx):
        return self.out(self.emb(idx).mean(1)).squeeze(1)


def main():
    backend, out = sys.argv[1], sys.argv[2]
    import kolo_torch  # noqa: F401
    dist.init_process_group(backend)
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    ddp = DDP(Model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own rows: overlapping, not equal
    losses = []
    for _ in range(STEPS):
        idx = torch.randint(0, 24, (4, 5), generator=gen)
        target = idx.float().mean(1) / 24
        loss = nn.functional.mse_loss(ddp(idx), target)
        opt.zero_grad()
        loss.backward()
        assert ddp.module.emb.weight.grad.is_sparse
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        losses.append(avg.item() / world)
    w = ddp.module.emb.weight.detach()
    # Every rank holds the same weights after each step (DDP averaged the same gradients).
    gathered = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(gathered, w)
    same = all(torch.equal(g, w) for g in gathered)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"losses": losses, "weights": w.flatten().tolist(), "ranks_agree": same}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
