#include "plait/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "plait/core/error.h"
#include "plait/kernels/blas.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {
namespace {

// The sizes both directions derive from the blocks and the query segment.
struct Geometry {
  int e;              // keys: the sum of the block lengths
  int start;          // absolute position of the first query, e - s
  int d;              // head dimension
  int group;          // query heads per K/V head, heads / kv_heads
  int ckv;            // K (and V) columns of a K/V row, kv_heads * d
  int qblocks;        // query blocks of kAttentionQueryBlock rows
  std::int64_t work;  // batch*s*e*C/64, compared with kParallelMinElements
};

template <typename T>
Geometry geometry(std::span<const KVBlock<T>> blocks, int batch, int s, int c, int heads,
                  int kv_heads) {
  int e = 0;
  for (const auto& b : blocks) e += b.length;
  if (s <= 0 || e < s || heads <= 0 || c % heads != 0 || kv_heads <= 0 || heads % kv_heads != 0) {
    throw Error("attention: need 0 < s <= e, heads dividing C and kv_heads dividing heads; got s=" +
                std::to_string(s) + " e=" + std::to_string(e) + " C=" + std::to_string(c) +
                " heads=" + std::to_string(heads) + " kv_heads=" + std::to_string(kv_heads));
  }
  const int d = c / heads;
  // Work in multiply-adds of one of the products (~s*e/2 causal pairs, C each): a thread needs
  // a few tens of microseconds of it before a parallel region pays.
  return {e,
          e - s,
          d,
          heads / kv_heads,
          kv_heads * d,
          (s + kAttentionQueryBlock - 1) / kAttentionQueryBlock,
          std::int64_t{batch} * s * e * c / 64};
}

// Offset of K/V head j's K columns in batch row b of a block (V is ckv further on).
template <typename T>
std::size_t kv_offset(const KVBlock<T>& blk, const Geometry& g, int b, int j) {
  return static_cast<std::size_t>(b) * blk.length * 2 * g.ckv + static_cast<std::size_t>(j) * g.d;
}

// Calls fn(block, pos, kl) for each block that holds keys below kmax: pos is the block's first
// absolute position and kl how many of its keys are below kmax.
template <typename T, typename Fn>
void for_visible_blocks(std::span<const KVBlock<T>> blocks, int kmax, Fn&& fn) {
  int pos = 0;
  for (const auto& blk : blocks) {
    if (pos >= kmax) break;
    fn(blk, pos, std::min(blk.length, kmax - pos));
    pos += blk.length;
  }
}

// Row-wise causal softmax of the scores of query rows r0.. (row stride e, kmax columns
// computed): row r sees the first start + r0 + r + 1 keys; the rest of its kmax columns is set
// to zero. Columns from kmax on are never read (neither P v nor the backward go past kmax).
template <typename T>
void causal_softmax_rows(T* p, int rows, int r0, int start, int e, int kmax) {
  for (int r = 0; r < rows; ++r) {
    T* row = p + static_cast<std::size_t>(r) * e;
    const int valid = start + r0 + r + 1;
    const T m = max_of(row, valid);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < valid; ++j) {
      const T v = exp_fast(row[j] - m);
      row[j] = v;
      sum += v;
    }
    const T inv = T(1) / sum;
#pragma omp simd
    for (int j = 0; j < valid; ++j) row[j] *= inv;
    std::fill(row + valid, row + kmax, T(0));
  }
}

// dS = P * (dP - rowsum(P * dP)) in place over dP (row stride kmax), zero past each row's
// last visible key.
template <typename T>
void softmax_backward_rows(T* ds, const T* p, int rows, int r0, int start, int e, int kmax) {
  for (int r = 0; r < rows; ++r) {
    const T* prow = p + static_cast<std::size_t>(r) * e;
    T* row = ds + static_cast<std::size_t>(r) * kmax;
    const int valid = start + r0 + r + 1;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < valid; ++j) dot += prow[j] * row[j];
#pragma omp simd
    for (int j = 0; j < valid; ++j) row[j] = prow[j] * (row[j] - dot);
    std::fill(row + valid, row + kmax, T(0));
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* q, std::span<const KVBlock<T>> blocks, int batch,
                       int s, int c, int heads, int kv_heads) {
  const Geometry g = geometry(blocks, batch, s, c, heads, kv_heads);
  const int d = g.d, ldkv = 2 * g.ckv;
  const T scale = T(1) / std::sqrt(T(d));
  const int items = batch * heads * g.qblocks;
  // Items differ in cost (later query blocks see more keys), hence dynamic scheduling; each item
  // writes its own rows of probs and its own (rows, head) slice of out, so the result does not
  // depend on which thread runs it.
#pragma omp parallel for schedule(dynamic, 1) if (parallel_worthwhile(g.work))
  for (int item = 0; item < items; ++item) {
    const int qb = item % g.qblocks;
    const int h = (item / g.qblocks) % heads;
    const int b = item / (g.qblocks * heads);
    const int j = h / g.group;  // the K/V head of h's group (repeat_kv)
    const int r0 = qb * kAttentionQueryBlock;
    const int rows = std::min(s, r0 + kAttentionQueryBlock) - r0;
    const int kmax = g.start + r0 + rows;  // keys this query block can see
    T* p = probs + (static_cast<std::size_t>(b * heads + h) * s + r0) * g.e;
    const T* qq = q + (static_cast<std::size_t>(b) * s + r0) * c + h * d;
    T* o = out + (static_cast<std::size_t>(b) * s + r0) * c + h * d;
    // S = q k^T / sqrt(d), block by block of keys.
    for_visible_blocks(blocks, kmax, [&](const KVBlock<T>& blk, int pos, int kl) {
      const T* k = blk.kv + kv_offset(blk, g, b, j);
      gemm<T>(false, true, rows, kl, d, scale, qq, c, k, ldkv, T(0), p + pos, g.e);
    });
    causal_softmax_rows(p, rows, r0, g.start, g.e, kmax);
    // out = P v.
    for_visible_blocks(blocks, kmax, [&](const KVBlock<T>& blk, int pos, int kl) {
      const T* v = blk.kv + kv_offset(blk, g, b, j) + g.ckv;
      gemm<T>(false, false, rows, d, kl, T(1), p + pos, g.e, v, ldkv, pos == 0 ? T(0) : T(1), o, c);
    });
  }
}

template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* probs, int batch, int s, int c, int heads, int kv_heads,
                        T* workspace) {
  const Geometry g = geometry(blocks, batch, s, c, heads, kv_heads);
  const int d = g.d, ldkv = 2 * g.ckv;
  const T scale = T(1) / std::sqrt(T(d));
  const std::size_t per_thread = attention_backward_workspace(s, g.e, 1);
  // One (batch row, K/V head) per item: the query heads of its group and their query blocks run
  // in order on one thread because they all accumulate into the same dk/dv slice (fixed order:
  // deterministic, and no two threads write the same dk/dv).
#pragma omp parallel for schedule(dynamic, 1) if (parallel_worthwhile(g.work))
  for (int item = 0; item < batch * kv_heads; ++item) {
    const int j = item % kv_heads;
    const int b = item / kv_heads;
    T* ds = workspace + static_cast<std::size_t>(omp_get_thread_num()) * per_thread;
    for (int h = j * g.group; h < (j + 1) * g.group; ++h) {
      for (int qb = 0; qb < g.qblocks; ++qb) {
        const int r0 = qb * kAttentionQueryBlock;
        const int rows = std::min(s, r0 + kAttentionQueryBlock) - r0;
        const int kmax = g.start + r0 + rows;
        const T* p = probs + (static_cast<std::size_t>(b * heads + h) * s + r0) * g.e;
        const std::size_t row_offset = (static_cast<std::size_t>(b) * s + r0) * c + h * d;
        const T* qq = q + row_offset;
        const T* dout_blk = dout + row_offset;
        T* dq_blk = dq + row_offset;
        // dP = dout v^T over the visible keys: (rows, kmax), row stride kmax.
        for_visible_blocks(blocks, kmax, [&](const KVBlock<T>& blk, int pos, int kl) {
          const T* v = blk.kv + kv_offset(blk, g, b, j) + g.ckv;
          gemm<T>(false, true, rows, kl, d, T(1), dout_blk, c, v, ldkv, T(0), ds + pos, kmax);
        });
        softmax_backward_rows(ds, p, rows, r0, g.start, g.e, kmax);
        // dq = dS k / sqrt(d); dk += dS^T q / sqrt(d); dv += P^T dout.
        for_visible_blocks(blocks, kmax, [&](const KVBlock<T>& blk, int pos, int kl) {
          const std::size_t off = kv_offset(blk, g, b, j);
          gemm<T>(false, false, rows, d, kl, scale, ds + pos, kmax, blk.kv + off, ldkv,
                  pos == 0 ? T(0) : T(1), dq_blk, c);
          gemm<T>(true, false, kl, d, rows, scale, ds + pos, kmax, qq, c, T(1), blk.dkv + off,
                  ldkv);
          gemm<T>(true, false, kl, d, rows, T(1), p + pos, g.e, dout_blk, c, T(1),
                  blk.dkv + off + g.ckv, ldkv);
        });
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*,
                                       std::span<const KVBlock<float>>, int, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*,
                                        std::span<const KVBlock<double>>, int, int, int, int, int);
template void attention_backward<float>(float*, std::span<const KVBlock<float>>, const float*,
                                        const float*, const float*, int, int, int, int, int,
                                        float*);
template void attention_backward<double>(double*, std::span<const KVBlock<double>>, const double*,
                                         const double*, const double*, int, int, int, int, int,
                                         double*);

}  // namespace plait::kernels
