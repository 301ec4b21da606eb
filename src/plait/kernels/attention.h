#pragma once
// Causal multi-head self-attention over a query segment and a K/V prefix, as Seq1F1B runs it
// (Sun et al., NAACL 2025, section 3; ../shared/reference/seq1f1b.md "Attention across
// segments"): the queries are positions [start, start + s) of a sequence, the keys/values are
// positions [0, start + s) given as consecutive blocks (one per earlier segment plus the queries'
// own), and query position p sees keys 0..p.
//
// Grouped-query attention (Ainslie et al. 2023, GQA): `heads` query heads share `kv_heads` K/V
// heads (kv_heads divides heads); with g = heads / kv_heads, query head h reads K/V head h / g,
// i.e. K/V head j serves query heads j*g .. j*g+g-1 (Hugging Face's repeat_kv). kv_heads ==
// heads is ordinary multi-head attention (GPT-2), kv_heads == 1 multi-query attention.
//
// Layouts (row-major), d = C / heads the head dimension, Ckv = kv_heads * d: q (B, s, C) with
// head h in columns [h*d, (h+1)*d); each K/V block kv (B, len, 2 Ckv): K in columns [0, Ckv),
// V in [Ckv, 2 Ckv), K/V head j at offset j*d in each; out, dout and dq (B, s, C); lse
// (B, heads, s), e = start + s.
//
// The algorithm is FlashAttention-2's (Dao 2023, arXiv 2307.08691, Algorithms 1 and 2), itself
// the tiled online softmax of FlashAttention (Dao et al. 2022, arXiv 2205.14135; Milakov &
// Gimelshein 2018): queries in tiles of spec::kAttentionQueryTile rows meet their visible keys
// in tiles of spec::kAttentionKeyTile (spec/attention_tiles.h) and never hold more than one
// (query tile, key tile) block of scores, so the (s, e) probability matrix is never stored. The
// forward keeps each row's log-sum-exp; the backward recomputes each block's probabilities from
// it. Which key tiles a query tile visits, and which keys of a tile each row sees, is decided in
// one place (attention.cpp, "Visibility"): causal, and with a document mask (DocumentMask below)
// the key tiles wholly before the query's document are never visited and partial tiles are
// masked key by key.
//
// Precision: T = double (the tests' reference), float (the fp32 engine) or bf16 (storage only:
// q, kv, out, dout and dq are bf16). Arithmetic is in Acc<T> (kernels/accumulator.h: fp32 for
// bf16, T otherwise): inputs are widened exactly when a tile is loaded, the tile products
// accumulate in Acc<T>, and lse and the dK/dV accumulators are Acc<T>; only out and dq are
// rounded to T, once each. bf16 on a CPU with AVX-512 BF16 multiplies its tiles with vdpbf16ps
// instead (kernels/attention_path.h, attention_dpbf16.h): bf16 operands, fp32 sums, and P and dS
// rounded to bf16 before their products, as FlashAttention-2 on GPUs; the statistics and
// accumulators stay fp32. Results are the same for any OpenMP thread count (each output element
// is computed by one thread in a fixed order).
#include <cstddef>
#include <cstdint>
#include <span>

#include "plait/kernels/accumulator.h"
#include "plait/spec/attention_tiles.h"

namespace plait::kernels {

template <typename T>
struct KVBlock {
  const T* kv;  // (B, length, 2 Ckv)
  Acc<T>* dkv;  // (B, length, 2 Ckv); attention_backward accumulates into it (null in forward)
  int length;
};

// Document masks for sequences packed from several documents (issue 24): attention stays inside
// each document, as Llama 3 pre-trains (Dubey et al. 2024, "The Llama 3 Herd of Models", the
// pre-training recipe) and as FlashAttention's variable-length kernels and PyTorch
// flex-attention's document masks compute it. Query position p of batch row b sees key k iff
// start[b * stride + p] <= k <= p, where start[b * stride + p] is the position at which the
// document holding p begins: per token, so that any segment [start, start + s) of the row finds
// its queries' documents by absolute position. Along a row start is nondecreasing, start[p] <= p
// and start[start[p]] == start[p] (a document is one interval). start == nullptr: each row is one
// document (plain causal attention). stride: the positions of a row the array covers (>= e).
// Host memory: the CPU kernels read it in place.
struct DocumentMask {
  const std::int32_t* start = nullptr;
  int stride = 0;
  bool operator==(const DocumentMask&) const = default;
};

// out (B,s,C) = softmax(q k^T / sqrt(d) + causal and document mask) v, per query head with its
// group's K/V head; lse (B,heads,s) = log sum_{k visible} exp(q.k / sqrt(d)) of each row, in units of the
// scaled scores (as kernels/cuda/attention.h), kept for the backward. The blocks' lengths must
// sum to e >= s; the query offset is start = e - s. OpenMP runs one (batch row, head, query
// tile) per item, each on a per-thread scratch of spec::attention_forward_tile_elements(d)
// Acc<T> allocated for the call. Throws plait::Error unless 0 < s <= e, heads divides C and
// kv_heads divides heads, and a mask's stride covers e.
template <typename T>
void attention_forward(T* out, Acc<T>* lse, const T* q, std::span<const KVBlock<T>> blocks,
                       int batch, int s, int c, int heads, int kv_heads, DocumentMask mask = {});

// Elements of Acc<T> attention_backward's workspace needs with `threads` OpenMP threads, for
// head dimension head_dim (spec/attention_tiles.h: one tile scratch per thread, whatever s, e).
inline std::size_t attention_backward_workspace(int head_dim, int threads) {
  return spec::attention_workspace_elements(head_dim, threads);
}

// dq (B,s,C) = dL/dq; every block's dkv += dL/dk, dL/dv (so a later segment's backward leaves
// the gradient for earlier positions in their blocks). FlashAttention-2's backward, with the
// probabilities recomputed tile by tile from the forward's lse:
//   D = rowsum(dout * out)  (= rowsum(P * dP), since out = P v),
//   P = exp(q k^T / sqrt(d) - lse),  dP = dout v^T,  dS = P * (dP - D),
//   dq = dS k / sqrt(d),  dk += dS^T q / sqrt(d),  dv += P^T dout.
// out and lse are the forward's. OpenMP runs one (batch row, K/V head) per item: its g query
// heads (in the order j*g .. j*g+g-1) and their query tiles in order on one thread, since they
// all accumulate into the same dk/dv slice (deterministic and race-free); a query tile's dq is
// summed over its key tiles in Acc<T> and rounded once. mask: the forward's.
// workspace: attention_backward_workspace(d, omp_get_max_threads()) elements.
template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* out, const Acc<T>* lse, int batch, int s, int c, int heads,
                        int kv_heads, Acc<T>* workspace, DocumentMask mask = {});

}  // namespace plait::kernels
