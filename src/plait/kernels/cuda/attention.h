#pragma once
// Causal self-attention on the GPU, the CUDA twin of kernels/attention.h: the same queries,
// K/V blocks (a Seq1F1B segment's prefix given as the blocks of earlier segments), query offset,
// grouped-query heads and layouts (KVBlock below mirrors the CPU kernel's), computed the
// FlashAttention-2 way (Dao 2023, arXiv 2307.08691): tiles of queries against tiles of keys in
// shared memory with an online softmax, so the (s, e) score matrix is never stored. Instead of the
// CPU kernel's probabilities the forward keeps each row's log-sum-exp, and the backward
// recomputes the probabilities tile by tile from it.
//
// Layouts (row-major), d = C / heads, Ckv = kv_heads * d: q (B, s, C), head h in columns
// [h*d, (h+1)*d); each K/V block kv (B, len, 2 Ckv), K in [0, Ckv), V in [Ckv, 2 Ckv), K/V head j
// at offset j*d; out, dout, dq (B, s, C); lse (B, heads, s) fp32, in units of the scaled scores
// (lse = log sum_j exp(q.k_j / sqrt(d))). Query head h reads K/V head h / (heads / kv_heads).
// Query position p = start + r (start = e - s) sees keys 0..p; with a document mask
// (DeviceDocumentMask, packed documents) only keys start(p)..p, start(p) being where p's document
// begins (the CPU kernel's DocumentMask, kernels/attention.h): key tiles wholly before a query
// tile's first document are never loaded, partial ones masked key by key.
//
// Limits: head dimension d <= 128 (tiles are specialised for d <= 64 and d <= 128) and at most
// kMaxKVBlocks blocks per call; beyond either, plait::Error.
#include <cstddef>
#include <cstdint>
#include <span>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

inline constexpr int kMaxKVBlocks = 128;

// One K/V block as the CPU kernel's kernels::KVBlock, except that its gradient accumulator is
// fp32 whatever T: a segment's dK/dV collect the backward of every later segment, so mixed
// precision keeps them in fp32 (spec/unit_memory.h, bf16: "4 for ... dK/dV accumulators").
template <typename T>
struct KVBlock {
  const T* kv;  // (B, length, 2 Ckv)
  float* dkv;   // (B, length, 2 Ckv); attention_backward accumulates into it (null in forward)
  int length;
};

// The CPU kernel's DocumentMask in device memory: start[b * stride + p] is where the document
// holding position p of batch row b begins (stride >= e); start null: causal only.
struct DeviceDocumentMask {
  const std::int32_t* start = nullptr;
  int stride = 0;
};

// out (B,s,C) = softmax(q k^T / sqrt(d) + causal [and document] mask) v per query head with its
// group's K/V head; lse (B,heads,s) for the backward. Throws plait::Error unless 0 < s <= e,
// heads divides C, kv_heads divides heads, d <= 128, blocks.size() <= kMaxKVBlocks and a mask's
// stride covers e.
template <typename T>
void attention_forward(T* out, float* lse, const T* q, std::span<const KVBlock<T>> blocks,
                       int batch, int s, int c, int heads, int kv_heads, const Context& ctx,
                       DeviceDocumentMask mask = {});

// fp32 elements of workspace attention_backward needs: one value per query row and head,
// D = rowsum(dout * out) (FlashAttention-2, Algorithm 2, line 4).
inline std::size_t attention_backward_workspace(int batch, int s, int heads) {
  return static_cast<std::size_t>(batch) * heads * s;
}

// dq (B,s,C) = dL/dq; every block's dkv (fp32) += dL/dk, dL/dv (a later segment's backward leaves
// the gradient for earlier positions in their blocks), with the CPU kernel's formulas:
//   P = exp(q k^T / sqrt(d) - lse),  dP = dout v^T,  dS = P * (dP - D),  D = rowsum(dout * out),
//   dq = dS k / sqrt(d),  dk += dS^T q / sqrt(d),  dv += P^T dout
// (rowsum(P * dP) = rowsum(dout * out) since out = P v). Deterministic, without atomics: one
// kernel owns each query tile's dq (looping over its keys), another each key tile's dk, dv
// (looping over the queries that see it, for the g query heads of its group in order
// j*g .. j*g+g-1, as the CPU kernel). out and lse are the forward's.
template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* out, const float* lse, int batch, int s, int c, int heads,
                        int kv_heads, float* workspace, const Context& ctx,
                        DeviceDocumentMask mask = {});

}  // namespace plait::kernels::cuda
