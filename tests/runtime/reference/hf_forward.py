#!/usr/bin/env python3
"""Logits of a Hugging Face model directory computed from transformers' equations, written out by
hand in PyTorch (transformers itself is not needed): LlamaForCausalLM (modeling_llama.py:
LlamaRMSNorm, rotate-half rotary embedding, repeat_kv for grouped-query attention, SwiGLU MLP) and
GPT2LMHeadModel (modeling_gpt2.py: LayerNorm, Conv1D as x @ W + b with W stored (in, out),
gelu_new, learned positions). The tensors are read from the directory's safetensors file(s) by
parsing the format directly.

  hf_forward.py DIR OUT TOKEN...    writes the logits (T, V) as little-endian float32 to OUT

Used by tests/runtime/hf_reference_test.cpp, which compares them with plait's forward on the same
weights (the test skips where no python3 with torch is installed).
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[entry["dtype"]])
        tensors[name] = t.reshape(entry["shape"]).to(torch.float32)
    return tensors


def read_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        weights = {}
        for name in files:
            weights.update(read_safetensors(os.path.join(d, name)))
        return weights
    return read_safetensors(os.path.join(d, "model.safetensors"))


def causal_attention(q, k, v):
    # q, k, v: (heads, T, d); softmax(q k^T / sqrt(d) + causal mask) v
    t = q.shape[1]
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def llama(cfg, w, ids):
    c, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    d = c // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 10000.0)
    t = len(ids)

    def rmsnorm(x, weight):  # LlamaRMSNorm
        variance = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(variance + eps))

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = torch.arange(t).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    x = w["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        h = rmsnorm(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(t, nh, d).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(t, nkv, d).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(t, nkv, d).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = nh // nkv  # repeat_kv: K/V head j serves query heads j*g .. j*g+g-1
        k = k[:, None].expand(nkv, g, t, d).reshape(nh, t, d)
        v = v[:, None].expand(nkv, g, t, d).reshape(nh, t, d)
        a = causal_attention(q, k, v).transpose(0, 1).reshape(t, c)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"])
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return x @ head.T


def gpt2(cfg, w, ids):
    c, nh = cfg["n_embd"], cfg["n_head"]
    d = c // nh
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    t = len(ids)
    pre = "transformer." if "transformer.wte.weight" in w else ""

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (c,), w[name + ".weight"], w[name + ".bias"], eps)

    def conv1d(x, name):  # transformers' Conv1D: x @ W + b, W (in, out)
        return x @ w[name + ".weight"] + w[name + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    x = w[pre + "wte.weight"][ids] + w[pre + "wpe.weight"][:t]
    for layer in range(cfg["n_layer"]):
        p = pre + "h.%d." % layer
        qkv = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (z.view(t, nh, d).transpose(0, 1) for z in qkv.split(c, dim=-1))
        a = causal_attention(q, k, v).transpose(0, 1).reshape(t, c)
        x = x + conv1d(a, p + "attn.c_proj")
        m = gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc"))
        x = x + conv1d(m, p + "mlp.c_proj")
    x = ln(x, pre + "ln_f")
    head = w[pre + "wte.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    return x @ head.T


def main():
    d, out = sys.argv[1], sys.argv[2]
    ids = torch.tensor([int(t) for t in sys.argv[3:]], dtype=torch.long)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    w = read_weights(d)
    with torch.no_grad():
        logits = (llama if cfg["model_type"] == "llama" else gpt2)(cfg, w, ids)
    values = logits.contiguous().to(torch.float32).flatten().tolist()
    with open(out, "wb") as f:
        f.write(struct.pack("<%df" % len(values), *values))


if __name__ == "__main__":
    main()
