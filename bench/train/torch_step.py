#!/usr/bin/env python3
"""Forward + backward time of one training step of the example trainer's GPT in PyTorch.

The same model as examples/train/model (pre-norm GPT-2 blocks, tanh GELU, tied head, byte
vocabulary), written the usual PyTorch way with nn.Module, float32, on the CPU. Compare with
kolo-bench-gpt-step (same flags, same defaults):

  python3 bench/train/torch_step.py [--batch 8] [--seq 64] [--layers 4] [--heads 4] [--dim 128]
                                    [--vocab 256] [--steps 30] [--warmup 3] [--threads 1]
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)

    def forward(self, x, causal):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~causal[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, seq, layers, heads, dim):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(dim)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))
        # GPT-2 initialisation, as the C++ model's init(). It matters for timing too: with torch's
        # default N(0, 1) embeddings the logits are so large that softmax underflows to denormal
        # floats, and the head's backward matmuls on them run ~100x slower.
        for name, t in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(t)
            elif t.dim() == 1:
                nn.init.ones_(t)  # LayerNorm gains
            else:
                residual = name.endswith("proj.weight")
                nn.init.normal_(t, 0.0, 0.02 / math.sqrt(2 * layers) if residual else 0.02)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x, self.causal)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied head, as nanoGPT's lm_head
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("batch", 8), ("seq", 64), ("layers", 4), ("heads", 4), ("dim", 128), ("vocab", 256),
                          ("steps", 30), ("warmup", 3), ("threads", 1)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = GPT(a.vocab, a.seq, a.layers, a.heads, a.dim)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq))
    targets = torch.randint(0, a.vocab, (a.batch, a.seq))
    fwd, bwd = [], []
    for i in range(a.warmup + a.steps):
        model.zero_grad(set_to_none=False)
        t0 = time.perf_counter()
        loss = model(tokens, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if i >= a.warmup:
            fwd.append((t1 - t0) * 1e3)
            bwd.append((t2 - t1) * 1e3)
    step = [f + b for f, b in zip(fwd, bwd)]
    nparams = sum(t.numel() for t in model.parameters())
    print(f"torch {torch.__version__} gpt: params {nparams}, batch {a.batch} x seq {a.seq}, layers {a.layers}, "
          f"heads {a.heads}, dim {a.dim}, vocab {a.vocab}, {torch.get_num_threads()} thread(s)")
    print(f"median over {a.steps} steps: forward {statistics.median(fwd):.2f} ms, backward "
          f"{statistics.median(bwd):.2f} ms, forward+backward {statistics.median(step):.2f} ms (min {min(step):.2f})")


if __name__ == "__main__":
    main()
