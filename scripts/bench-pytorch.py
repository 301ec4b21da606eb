#!/usr/bin/env python3
"""PyTorch yardstick for `plait bench engine` (docs/engine.md, "Benchmark").

Times full training steps (forward, backward, AdamW) of the same two shapes that plait's
benchmark is quoted on, in the same way: GPT-2 small (12 x 768, 12 heads, vocabulary 50257,
tied head, learned positions) and the LLaMA shape (12 x 768, 12 query / 4 K/V heads, SwiGLU
2048, vocabulary 32000, untied head, rotary positions, RMSNorm), 4 sequences of 512 random
tokens per step, AdamW, fp32 or CPU bf16 autocast (torch.autocast("cpu", torch.bfloat16): bf16
matmuls through oneDNN, fp32 master weights, as plait's bf16 mode). Attention is written out
(PyTorch 1.13 has no fused attention): the S x S scores are materialised, as PyTorch users of
that version train.

PyTorch is a yardstick for this measurement only, never a plait dependency (Debian:
`apt-get install python3-torch`). Run it right after plait's benchmark with the same threads:

    OMP_NUM_THREADS=2 /usr/bin/python3 scripts/bench-pytorch.py --threads 2
    build/plait bench engine --threads 2 --precision both
"""
import argparse
import math
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("bench-pytorch.py: PyTorch is not installed (Debian: apt-get install python3-torch)")


def load_average():
    try:
        with open("/proc/loadavg") as f:
            one, five, fifteen = f.read().split()[:3]
        return f"load average {one} {five} {fifteen} (1/5/15 min)"
    except OSError:
        return "load average unavailable"


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # In fp32, as HF's LlamaRMSNorm computes it under mixed precision.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * h).to(x.dtype)


def rotary_tables(seq, head_dim, theta=10000.0):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def causal_attention(q, k, v):
    # q: (b, h, s, d); k, v: (b, h, s, d). Scores, causal mask, softmax, weighted values.
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(dim=-1).to(v.dtype) @ v


class Gpt2Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.out = nn.Linear(4 * c, c)

    def forward(self, x):
        b, s, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        shape = (b, s, self.heads, c // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LlamaBlock(nn.Module):
    def __init__(self, c, heads, kv_heads, ffn, seq):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, c // heads
        self.norm1 = RMSNorm(c)
        self.q = nn.Linear(c, c, bias=False)
        self.k = nn.Linear(c, kv_heads * self.d, bias=False)
        self.v = nn.Linear(c, kv_heads * self.d, bias=False)
        self.o = nn.Linear(c, c, bias=False)
        self.norm2 = RMSNorm(c)
        self.gate = nn.Linear(c, ffn, bias=False)
        self.up = nn.Linear(c, ffn, bias=False)
        self.down = nn.Linear(ffn, c, bias=False)
        cos, sin = rotary_tables(seq, self.d)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        b, s, c = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        q, k = rotate(q, self.cos[:s], self.sin[:s]), rotate(k, self.cos[:s], self.sin[:s])
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, c)
        x = x + self.o(y)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, family, layers, c, heads, kv_heads, ffn, vocab, seq):
        super().__init__()
        self.family = family
        self.wte = nn.Embedding(vocab, c)
        if family == "gpt2":
            self.wpe = nn.Embedding(seq, c)
            self.blocks = nn.ModuleList(Gpt2Block(c, heads) for _ in range(layers))
            self.norm = nn.LayerNorm(c)
            self.head = None  # tied to wte
        else:
            self.blocks = nn.ModuleList(LlamaBlock(c, heads, kv_heads, ffn, seq) for _ in range(layers))
            self.norm = RMSNorm(c)
            self.head = nn.Linear(c, vocab, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.wte(tokens)
        if self.family == "gpt2":
            x = x + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return x @ self.wte.weight.t() if self.head is None else self.head(x)


SHAPES = {
    # name: (family, layers, hidden, heads, kv_heads, ffn, vocab)
    "gpt2": ("gpt2", 12, 768, 12, 12, 3072, 50257),
    "llama": ("llama", 12, 768, 12, 4, 2048, 32000),
}


def bench(shape, precision, args):
    family, layers, c, heads, kv_heads, ffn, vocab = SHAPES[shape]
    torch.manual_seed(0)
    model = Model(family, layers, c, heads, kv_heads, ffn, vocab, args.seq)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    tokens = args.batch * args.seq
    print(f"\n{shape} ({family}, {layers} layers x {c}, {heads}/{kv_heads} heads, ffn {ffn}, vocab {vocab}, "
          f"{params / 1e6:.2f}M parameters), {precision}, {args.batch} x {args.seq} tokens per step; "
          f"{load_average()}")
    times = []
    for step in range(args.warmup + args.steps):
        x = torch.randint(0, vocab, (args.batch, args.seq))
        y = torch.randint(0, vocab, (args.batch, args.seq))
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        label = "warm-up" if step < args.warmup else str(step - args.warmup + 1)
        print(f"  {label:>7} {dt:8.3f} s {tokens / dt:9.1f} tokens/s  (loss {loss.item():.3f})")
        if step >= args.warmup:
            times.append(dt)
    best = min(times)
    median = sorted(times)[len(times) // 2]
    print(f"result {shape} {precision}: best step {best:.3f} s: {tokens / best:.1f} tokens/s (median "
          f"{tokens / median:.1f}); {load_average()}")
    return tokens / best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)")
    ap.add_argument("--model", choices=["gpt2", "llama", "both"], default="both")
    ap.add_argument("--precision", choices=["fp32", "bf16", "both"], default="bf16")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"oneDNN {torch.backends.mkldnn.is_available() and 'available' or 'absent'}; {load_average()}")
    shapes = ["gpt2", "llama"] if args.model == "both" else [args.model]
    precisions = ["fp32", "bf16"] if args.precision == "both" else [args.precision]
    for shape in shapes:
        for precision in precisions:
            bench(shape, precision, args)


if __name__ == "__main__":
    main()
