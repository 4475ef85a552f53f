#!/usr/bin/env python3
"""PyTorch reference for tests/train/torch_reference_test.cpp.

Reads the model's configuration, its flat float32 parameters, a batch and AdamW hyperparameters
from the binary file argv[1] (written by the test), builds the same GPT with torch's own ops
(F.layer_norm, F.linear, F.gelu(approximate='tanh'), F.cross_entropy, torch.optim.AdamW), in
float64, runs `steps` training steps on that batch and writes argv[2]:
  float64 loss[steps] | float32 grads of step 1 [P] | float32 params after all steps [P]
Exits with status 77 when torch cannot be imported.
Input layout (little-endian):
  b"KGPT" | int32 vocab, seq, layers, heads, dim, B, T, steps, num_tensors
  | float64 lr, beta1, beta2, eps, weight_decay
  | num_tensors x (int64 count, int32 decay) | int32 tokens[B*T] | int32 targets[B*T] | float32 params[P]
"""
import math
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)  # the test skips on this status: this interpreter has no torch


def param_shapes(vocab, seq, layers, dim):
    """Names and shapes in the C++ model's layout order (examples/train/model/model.hpp)."""
    C = dim
    shapes = [("wte", (vocab, C)), ("wpe", (seq, C))]
    for l in range(layers):
        h = f"h.{l}."
        shapes += [(h + "ln1.weight", (C,)), (h + "ln1.bias", (C,)),
                   (h + "attn.qkv.weight", (3 * C, C)), (h + "attn.qkv.bias", (3 * C,)),
                   (h + "attn.proj.weight", (C, C)), (h + "attn.proj.bias", (C,)),
                   (h + "ln2.weight", (C,)), (h + "ln2.bias", (C,)),
                   (h + "mlp.fc.weight", (4 * C, C)), (h + "mlp.fc.bias", (4 * C,)),
                   (h + "mlp.proj.weight", (C, 4 * C)), (h + "mlp.proj.bias", (C,))]
    shapes += [("lnf.weight", (C,)), ("lnf.bias", (C,))]
    return shapes


def gpt_loss(p, tokens, targets, layers, heads):
    """Mean cross-entropy of the GPT on tokens [B,T]; p maps parameter names to tensors."""
    B, T = tokens.shape
    C = p["wte"].shape[1]
    hs = C // heads
    x = p["wte"][tokens] + p["wpe"][:T]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(layers):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln1.weight"], p[h + "ln1.bias"], 1e-5)
        q, k, v = F.linear(a, p[h + "attn.qkv.weight"], p[h + "attn.qkv.bias"]).split(C, dim=2)
        q, k, v = (t.view(B, T, heads, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p[h + "attn.proj.weight"], p[h + "attn.proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln2.weight"], p[h + "ln2.bias"], 1e-5)
        m = F.gelu(F.linear(m, p[h + "mlp.fc.weight"], p[h + "mlp.fc.bias"]), approximate="tanh")
        x = x + F.linear(m, p[h + "mlp.proj.weight"], p[h + "mlp.proj.bias"])
    x = F.layer_norm(x, (C,), p["lnf.weight"], p["lnf.bias"], 1e-5)
    logits = x @ p["wte"].t()  # tied head
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def main():
    data = open(sys.argv[1], "rb").read()
    if data[:4] != b"KGPT":
        sys.exit("torch_reference: bad magic")
    pos = 4
    vocab, seq, layers, heads, dim, B, T, steps, ntensors = struct.unpack_from("<9i", data, pos)
    pos += 36
    lr, beta1, beta2, eps, wd = struct.unpack_from("<5d", data, pos)
    pos += 40
    shapes = param_shapes(vocab, seq, layers, dim)
    if ntensors != len(shapes):
        sys.exit(f"torch_reference: {ntensors} tensors, expected {len(shapes)}")
    decay = []
    for name, shape in shapes:
        count, dec = struct.unpack_from("<qi", data, pos)
        pos += 12
        if count != math.prod(shape):
            sys.exit(f"torch_reference: {name} has {count} elements, expected {math.prod(shape)}")
        decay.append(bool(dec))
    n = B * T
    tokens = torch.tensor(struct.unpack_from(f"<{n}i", data, pos), dtype=torch.long).view(B, T)
    pos += 4 * n
    targets = torch.tensor(struct.unpack_from(f"<{n}i", data, pos), dtype=torch.long).view(B, T)
    pos += 4 * n
    total = sum(math.prod(s) for _, s in shapes)
    flat = torch.frombuffer(bytearray(data[pos:pos + 4 * total]), dtype=torch.float32).to(torch.float64)
    if flat.numel() != total:
        sys.exit("torch_reference: truncated parameters")

    params, offset = {}, 0
    for name, shape in shapes:
        count = math.prod(shape)
        params[name] = flat[offset:offset + count].view(shape).clone().requires_grad_(True)
        offset += count
    groups = [{"params": [params[nm] for (nm, _), d in zip(shapes, decay) if d], "weight_decay": wd},
              {"params": [params[nm] for (nm, _), d in zip(shapes, decay) if not d], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps)

    losses, first_grads = [], None
    for _ in range(steps):
        opt.zero_grad()
        loss = gpt_loss(params, tokens, targets, layers, heads)
        loss.backward()
        losses.append(loss.item())
        if first_grads is None:
            first_grads = torch.cat([params[nm].grad.reshape(-1) for nm, _ in shapes])
        opt.step()
    final = torch.cat([params[nm].detach().reshape(-1) for nm, _ in shapes])
    with open(sys.argv[2], "wb") as out:
        out.write(struct.pack(f"<{steps}d", *losses))
        out.write(first_grads.to(torch.float32).numpy().tobytes())
        out.write(final.to(torch.float32).numpy().tobytes())


if __name__ == "__main__":
    main()
