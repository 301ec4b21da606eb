#include "plait/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "plait/core/error.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"
#include "plait/kernels/tile_product.h"

namespace plait::kernels {
namespace {

using spec::kAttentionKeyTile;
using spec::kAttentionQueryTile;
constexpr int kBq = kAttentionQueryTile, kBk = kAttentionKeyTile;

// The sizes both directions derive from the blocks and the query segment.
struct Geometry {
  int e;              // keys: the sum of the block lengths
  int start;          // absolute position of the first query, e - s
  int d;              // head dimension
  int dp;             // d padded to the tiles' width (spec::attention_padded_head_dim)
  int group;          // query heads per K/V head, heads / kv_heads
  int ckv;            // K (and V) columns of a K/V row, kv_heads * d
  int qtiles;         // query tiles of kBq rows
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
          spec::attention_padded_head_dim(d),
          heads / kv_heads,
          kv_heads * d,
          (s + kBq - 1) / kBq,
          std::int64_t{batch} * s * e * c / 64};
}

// ---- Visibility: which keys a query sees, the one place that decides it.
//
// A key tile is keys [pos, pos + length) of the sequence, rows [row, row + length) of
// blocks[block] (tiles never straddle blocks: each block is its own buffer). for_each_key_tile
// calls fn(tile, masked) for the key tiles that some query of [q0, q1) (absolute positions)
// sees, in increasing position; `masked` when some query of the range does not see all of the
// tile, so the kernels ask visible_queries() key by key. Causal: query p sees keys 0..p, so the
// tiles past the last query are never visited and only those crossing the diagonal are masked.
// A document mask (keys of the query's own document only) changes these two functions alone:
// its for_each_key_tile also skips the tiles that lie wholly in documents before that of the
// range's first query, and visible_queries returns the queries of the key's own document (still
// one interval).
struct KeyTile {
  int block, row, pos, length;
};

template <typename T, typename Fn>
void for_each_key_tile(std::span<const KVBlock<T>> blocks, int q0, int q1, Fn&& fn) {
  int pos = 0;
  for (int bi = 0; bi < static_cast<int>(blocks.size()) && pos < q1; ++bi) {
    const int length = blocks[bi].length;
    for (int row = 0; row < length && pos + row < q1; row += kBk) {
      // Keys at or past q1 are seen by no query of the range: cut the tile there.
      const KeyTile t{bi, row, pos + row, std::min({kBk, length - row, q1 - (pos + row)})};
      fn(t, t.pos + t.length - 1 > q0);
    }
    pos += length;
  }
}

// The queries [lo, hi) of a tile of `rows` queries from position p0 that see key position k.
struct QueryRange {
  int lo, hi;
};
QueryRange visible_queries(int k, int p0, int rows) { return {std::clamp(k - p0, 0, rows), rows}; }

// ---- Tile loads: widen T to the accumulation type W once per tile (exact for bf16 and fp32).

// [from, to) = 0; nothing (no library call) when empty, the usual case for the padding.
template <typename W>
void zero(W* from, W* to) {
  if (to > from) std::fill(from, to, W(0));
}

// dst (rows, ld) = scale * src[r * lds + j], j < cols; columns [cols, ld) zero.
template <typename W, typename T>
void load_rows(W* dst, int ld, const T* src, std::size_t lds, int rows, int cols, W scale) {
  for (int r = 0; r < rows; ++r) {
    const T* in = src + r * lds;
    W* o = dst + static_cast<std::size_t>(r) * ld;
#pragma omp simd
    for (int j = 0; j < cols; ++j) o[j] = scale * static_cast<W>(in[j]);
    zero(o + cols, o + ld);
  }
}

// dst (cols, ld): dst[j * ld + r] = scale * src[r * lds + j], r < rows; columns [rows, pad)
// zero, pad = rows rounded up to the tile padding (what the tile product loads past the last
// column).
template <typename W, typename T>
void load_transposed(W* dst, int ld, const T* src, std::size_t lds, int rows, int cols, W scale) {
  const int pad = std::min(ld, spec::attention_padded_head_dim(rows));
  for (int j = 0; j < cols; ++j) {
    W* o = dst + static_cast<std::size_t>(j) * ld;
    for (int r = 0; r < rows; ++r) o[r] = scale * static_cast<W>(src[r * lds + j]);
    zero(o + rows, o + pad);
  }
}

// Where a (batch row, K/V head) slice of a K/V block starts; V is ckv further on.
template <typename T>
std::size_t kv_offset(const KVBlock<T>& blk, const Geometry& g, int b, int j) {
  return static_cast<std::size_t>(b) * blk.length * 2 * g.ckv + static_cast<std::size_t>(j) * g.d;
}

// The tiles hold scores transposed, S^T (keys, queries) = K (q / sqrt(d))^T: a key tile's K and
// V are then the left operand of their products, read where they lie (tile_product.h broadcasts
// the left operand one element at a time), and only the query tile is transposed, once for all
// its key tiles. The softmax runs down the columns, a query per SIMD lane.

// Masks S^T's entries that the query does not see with -infinity (so they take no part in a
// maximum and mark themselves for exp_masked).
template <typename W>
void mask_scores(W* st, const KeyTile& t, int p0, int rows) {
  for (int x = 0; x < t.length; ++x) {
    const QueryRange vis = visible_queries(t.pos + x, p0, rows);
    W* row = st + x * kBq;
    for (int i = 0; i < rows; ++i) {
      if (i < vis.lo || i >= vis.hi) row[i] = -std::numeric_limits<W>::infinity();
    }
  }
}

// P^T = exp(S^T - shift[query]) over a tile's rows; masked (-infinity) entries become 0 (exp_fast
// clamps its argument, so exp_fast(-inf) is tiny, not 0).
template <typename W>
void exp_shifted(W* st, const W* shift, int length, int rows, bool masked) {
  constexpr W kMasked = -std::numeric_limits<W>::infinity();
  for (int x = 0; x < length; ++x) {
    W* row = st + x * kBq;
    if (masked) {
#pragma omp simd
      for (int i = 0; i < rows; ++i) row[i] = row[i] == kMasked ? W(0) : exp_fast(row[i] - shift[i]);
    } else {
#pragma omp simd
      for (int i = 0; i < rows; ++i) row[i] = exp_fast(row[i] - shift[i]);
    }
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, Acc<T>* lse, const T* q, std::span<const KVBlock<T>> blocks,
                       int batch, int s, int c, int heads, int kv_heads) {
  using W = Acc<T>;
  const Geometry g = geometry(blocks, batch, s, c, heads, kv_heads);
  const int d = g.d, dp = g.dp;
  const std::size_t ldkv = 2 * static_cast<std::size_t>(g.ckv);
  const W scale = W(1) / std::sqrt(W(d));
  const int items = batch * heads * g.qtiles;
  constexpr W kNoMax = -std::numeric_limits<W>::infinity();
#pragma omp parallel if (parallel_worthwhile(g.work))
  {
    // This thread's tiles (spec::attention_forward_tile_elements).
    std::vector<W> scratch(spec::attention_forward_tile_elements(d));
    W* qt = scratch.data();                          // (d, Bq) (q / sqrt(d))^T
    W* acc = qt + static_cast<std::size_t>(d) * kBq;  // (Bq, dp) unnormalised output
    W* vr = acc + kBq * dp;                          // (Bk, dp) V
    W* st = vr + kBk * dp;                           // (Bk, Bq) S^T, then P^T
    W* m = st + kBk * kBq;                           // (Bq) running maximum of each query
    W* l = m + kBq;                                  // (Bq) running sum
    W* mt = l + kBq;                                 // (Bq) the maximum with this key tile
    W* alpha = mt + kBq;                             // (Bq) rescaling of acc and l
    // Items differ in cost (later query tiles see more keys), hence dynamic scheduling; each
    // writes its own rows of lse and its own (rows, head) slice of out.
#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < items; ++item) {
      const int qtile = item % g.qtiles;
      const int h = (item / g.qtiles) % heads;
      const int b = item / (g.qtiles * heads);
      const int j = h / g.group;  // the K/V head of h's group (repeat_kv)
      const int r0 = qtile * kBq;
      const int rows = std::min(s, r0 + kBq) - r0;
      const int p0 = g.start + r0;  // absolute position of the tile's first query
      const std::size_t row_offset = (static_cast<std::size_t>(b) * s + r0) * c + h * d;
      load_transposed(qt, kBq, q + row_offset, c, rows, d, scale);
      zero(acc, acc + static_cast<std::size_t>(rows) * dp);
      std::fill(m, m + rows, kNoMax);
      zero(l, l + rows);
      for_each_key_tile(blocks, p0, p0 + rows, [&](const KeyTile& t, bool masked) {
        const KVBlock<T>& blk = blocks[t.block];
        const T* k = blk.kv + kv_offset(blk, g, b, j) + t.row * ldkv;
        load_rows(vr, dp, k + g.ckv, ldkv, t.length, d, W(1));
        // S^T = k (q / sqrt(d))^T.
        tile::product(t.length, rows, d, k, static_cast<int>(ldkv), 1, qt, kBq, st, kBq, false);
        if (masked) mask_scores(st, t, p0, rows);
        // Online softmax (FlashAttention-2 Algorithm 1, lines 8-10): the new maximum of each
        // query, P = exp(S - m), the running sum and the accumulator rescaled by
        // exp(m_old - m_new). A query that has seen no key yet keeps m = -inf, P = 0.
        std::copy(m, m + rows, mt);
        for (int x = 0; x < t.length; ++x) {
          const W* row = st + x * kBq;
#pragma omp simd
          for (int i = 0; i < rows; ++i) mt[i] = mt[i] > row[i] ? mt[i] : row[i];
        }
#pragma omp simd
        for (int i = 0; i < rows; ++i) {
          mt[i] = mt[i] == kNoMax ? W(0) : mt[i];  // the shift of a query without keys yet
          alpha[i] = exp_fast(m[i] - mt[i]);      // m = -inf: acc and l are 0 anyway
        }
        exp_shifted(st, mt, t.length, rows, masked);
#pragma omp simd
        for (int i = 0; i < rows; ++i) l[i] *= alpha[i];
        for (int x = 0; x < t.length; ++x) {
          const W* row = st + x * kBq;
#pragma omp simd
          for (int i = 0; i < rows; ++i) l[i] += row[i];
        }
        for (int i = 0; i < rows; ++i) {
          if (m[i] == mt[i]) continue;
          W* a = acc + static_cast<std::size_t>(i) * dp;
          const W f = alpha[i];
#pragma omp simd
          for (int x = 0; x < d; ++x) a[x] *= f;
          m[i] = mt[i];
        }
        // acc += P v (A = P^T read transposed).
        tile::product(rows, d, t.length, st, 1, kBq, vr, dp, acc, dp, true);
      });
      // out = acc / l, lse = m + log l (Algorithm 1, lines 12-13).
      W* lse_rows = lse + (static_cast<std::size_t>(b) * heads + h) * s + r0;
      for (int r = 0; r < rows; ++r) {
        const W inv = W(1) / l[r];
        const W* a = acc + static_cast<std::size_t>(r) * dp;
        T* o = out + row_offset + static_cast<std::size_t>(r) * c;
        for (int x = 0; x < d; ++x) o[x] = T(a[x] * inv);
        lse_rows[r] = m[r] + std::log(l[r]);
      }
    }
  }
}

template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* out, const Acc<T>* lse, int batch, int s, int c, int heads,
                        int kv_heads, Acc<T>* workspace) {
  using W = Acc<T>;
  const Geometry g = geometry(blocks, batch, s, c, heads, kv_heads);
  const int d = g.d, dp = g.dp;
  const std::size_t ldkv = 2 * static_cast<std::size_t>(g.ckv);
  const int lda_kv = static_cast<int>(ldkv);
  const W scale = W(1) / std::sqrt(W(d));
  const std::size_t per_thread = spec::attention_backward_tile_elements(d);
  // One (batch row, K/V head) per item: the query heads of its group and their query tiles run
  // in order on one thread because they all accumulate into the same dk/dv slice (fixed order:
  // deterministic, and no two threads write the same dk/dv).
#pragma omp parallel for schedule(dynamic, 1) if (parallel_worthwhile(g.work))
  for (int item = 0; item < batch * kv_heads; ++item) {
    const int j = item % kv_heads;
    const int b = item / kv_heads;
    W* qt = workspace + static_cast<std::size_t>(omp_get_thread_num()) * per_thread;
    W* dot = qt + static_cast<std::size_t>(d) * kBq;  // (d, Bq) dout^T
    W* qr = dot + static_cast<std::size_t>(d) * kBq;  // (Bq, dp) q / sqrt(d)
    W* dor = qr + kBq * dp;                           // (Bq, dp) dout
    W* dqa = dor + kBq * dp;                          // (Bq, dp) dq accumulator (unscaled)
    W* kr = dqa + kBq * dp;                           // (Bk, dp) K
    W* pt = kr + kBk * dp;                            // (Bk, Bq) P^T
    W* dst = pt + kBk * kBq;                          // (Bk, Bq) dP^T, then dS^T
    W* dd = dst + kBk * kBq;                          // (Bq) D
    W* ls = dd + kBq;                                 // (Bq) lse
    for (int h = j * g.group; h < (j + 1) * g.group; ++h) {
      for (int qtile = 0; qtile < g.qtiles; ++qtile) {
        const int r0 = qtile * kBq;
        const int rows = std::min(s, r0 + kBq) - r0;
        const int p0 = g.start + r0;
        const std::size_t row_offset = (static_cast<std::size_t>(b) * s + r0) * c + h * d;
        load_transposed(qt, kBq, q + row_offset, c, rows, d, scale);
        load_transposed(dot, kBq, dout + row_offset, c, rows, d, W(1));
        load_rows(qr, dp, q + row_offset, c, rows, d, scale);
        load_rows(dor, dp, dout + row_offset, c, rows, d, W(1));
        zero(dqa, dqa + static_cast<std::size_t>(rows) * dp);
        const W* lse_rows = lse + (static_cast<std::size_t>(b) * heads + h) * s + r0;
        // D = rowsum(dout * out) (FlashAttention-2 Algorithm 2, line 4).
        for (int r = 0; r < rows; ++r) {
          const T* o = out + row_offset + static_cast<std::size_t>(r) * c;
          const W* dor_r = dor + static_cast<std::size_t>(r) * dp;
          W sum = 0;
          for (int x = 0; x < d; ++x) sum += dor_r[x] * static_cast<W>(o[x]);
          dd[r] = sum;
          ls[r] = lse_rows[r];
        }
        for_each_key_tile(blocks, p0, p0 + rows, [&](const KeyTile& t, bool masked) {
          const KVBlock<T>& blk = blocks[t.block];
          const std::size_t off = kv_offset(blk, g, b, j) + t.row * ldkv;
          const T* k = blk.kv + off;
          W* dk = blk.dkv + off;
          load_rows(kr, dp, k, ldkv, t.length, d, W(1));
          // P^T = exp(k (q / sqrt(d))^T - lse), zero where a query does not see the key.
          tile::product(t.length, rows, d, k, lda_kv, 1, qt, kBq, pt, kBq, false);
          if (masked) mask_scores(pt, t, p0, rows);
          exp_shifted(pt, ls, t.length, rows, masked);
          // dv += P^T dout.
          tile::product(t.length, d, rows, pt, kBq, 1, dor, dp, dk + g.ckv, lda_kv, true);
          // dP^T = v dout^T; dS^T = P^T * (dP^T - D).
          tile::product(t.length, rows, d, k + g.ckv, lda_kv, 1, dot, kBq, dst, kBq, false);
          for (int x = 0; x < t.length; ++x) {
            W* dsr = dst + x * kBq;
            const W* pr = pt + x * kBq;
#pragma omp simd
            for (int i = 0; i < rows; ++i) dsr[i] = pr[i] * (dsr[i] - dd[i]);
          }
          // dk += dS^T (q / sqrt(d)); dq += dS k (A = dS^T read transposed; scaled by
          // 1/sqrt(d) once, at the end).
          tile::product(t.length, d, rows, dst, kBq, 1, qr, dp, dk, lda_kv, true);
          tile::product(rows, d, t.length, dst, 1, kBq, kr, dp, dqa, dp, true);
        });
        for (int r = 0; r < rows; ++r) {
          const W* a = dqa + static_cast<std::size_t>(r) * dp;
          T* o = dq + row_offset + static_cast<std::size_t>(r) * c;
          for (int x = 0; x < d; ++x) o[x] = T(a[x] * scale);
        }
      }
    }
  }
}

#define PLAIT_ATTENTION_INSTANTIATE(T)                                                        \
  template void attention_forward<T>(T*, Acc<T>*, const T*, std::span<const KVBlock<T>>, int, \
                                     int, int, int, int);                                     \
  template void attention_backward<T>(T*, std::span<const KVBlock<T>>, const T*, const T*,    \
                                      const T*, const Acc<T>*, int, int, int, int, int,       \
                                      Acc<T>*);
PLAIT_ATTENTION_INSTANTIATE(double)
PLAIT_ATTENTION_INSTANTIATE(float)
PLAIT_ATTENTION_INSTANTIATE(bf16)
#undef PLAIT_ATTENTION_INSTANTIATE

}  // namespace plait::kernels
