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
// V in [Ckv, 2 Ckv), K/V head j at offset j*d in each; probs (B, NH, s, e), e = start + s; out
// and dout (B, s, C). Every matrix product is a BLAS call on strided views of these buffers;
// OpenMP runs one (batch row, head, query block) per thread forward and one (batch row, K/V
// head) backward.
#include <cstddef>
#include <span>

#include "plait/spec/unit_memory.h"
#include "plait/kernels/accumulator.h"

namespace plait::kernels {

template <typename T>
struct KVBlock {
  const T* kv;  // (B, length, 2 Ckv)
  Acc<T>* dkv;  // (B, length, 2 Ckv); attention_backward accumulates into it (null in forward)
  int length;
};

// Queries are processed in blocks of spec::kAttentionQueryBlock rows; a block needs keys only up
// to its last row's position, so the causal upper triangle is skipped except inside the diagonal
// blocks. The block size and the backward's workspace are the model description's memory
// formulas (spec/unit_memory.h), which the engine's accounting and the planner read.
using spec::kAttentionQueryBlock;

// out (B,s,C) = softmax(q k^T / sqrt(d) + causal mask) v, per query head with its group's K/V
// head; probs (B,NH,s,e) keeps the probabilities for the backward: row r holds them for keys
// 0..start+r, zeros up to the end of its query block's visible keys, and is not written past
// that (the causal triangle that attention_backward never reads). The blocks' lengths must sum
// to e >= s; the query offset is start = e - s. Throws plait::Error unless heads divides C and
// kv_heads divides heads.
template <typename T>
void attention_forward(T* out, T* probs, const T* q, std::span<const KVBlock<T>> blocks, int batch,
                       int s, int c, int heads, int kv_heads);

// Workspace (in elements of T) attention_backward needs with `threads` OpenMP threads.
inline std::size_t attention_backward_workspace(int s, int e, int threads) {
  return spec::attention_workspace_elements(s, e, threads);
}

// dq (B,s,C) = dL/dq; every block's dkv += dL/dk, dL/dv (so a later segment's backward leaves
// the gradient for earlier positions in their blocks). Standard softmax backward:
//   dP = dout v^T,  dS = P * (dP - rowsum(P * dP)),  dq = dS k / sqrt(d),
//   dk += dS^T q / sqrt(d),  dv += P^T dout,
// a K/V head's dk, dv summed over the g query heads of its group (in the order j*g .. j*g+g-1,
// on one thread: deterministic and race-free).
// workspace: attention_backward_workspace(s, e, omp_get_max_threads()) elements.
template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* probs, int batch, int s, int c, int heads, int kv_heads,
                        T* workspace);

}  // namespace plait::kernels
