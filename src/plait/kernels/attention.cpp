#include "plait/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "plait/core/error.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"
#include "plait/kernels/attention_dpbf16.h"
#include "plait/kernels/attention_path.h"
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
                  int kv_heads, DocumentMask mask) {
  int e = 0;
  for (const auto& b : blocks) e += b.length;
  if (s <= 0 || e < s || heads <= 0 || c % heads != 0 || kv_heads <= 0 || heads % kv_heads != 0) {
    throw Error("attention: need 0 < s <= e, heads dividing C and kv_heads dividing heads; got s=" +
                std::to_string(s) + " e=" + std::to_string(e) + " C=" + std::to_string(c) +
                " heads=" + std::to_string(heads) + " kv_heads=" + std::to_string(kv_heads));
  }
  if (mask.start != nullptr && mask.stride < e) {
    throw Error("attention: the document mask covers " + std::to_string(mask.stride) +
                " positions of a row, the keys reach " + std::to_string(e));
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
// Query position p sees keys [first(p), p]: first(p) = 0 (causal), or the start of p's document
// under a document mask (attention.h, DocumentMask). A key tile is keys [pos, pos + length) of
// the sequence, rows [row, row + length) of blocks[block] (tiles never straddle blocks: each block
// is its own buffer). for_each_key_tile calls fn(tile, masked) for the key tiles that some query
// of [q0, q1) (absolute positions) sees, in increasing position: the queries' documents are
// consecutive intervals, so those keys are the one interval [first(q0), q1), and the tiles wholly
// before first(q0) (earlier documents) or at or past q1 (the future) are never visited. A tile is
// `masked` when some query of the range does not see all of it -- it crosses the diagonal, or
// begins before first(q1 - 1), the last query's document -- and the kernels then ask
// Visibility::queries() key by key.
struct KeyTile {
  int block, row, pos, length;
};

// The queries [lo, hi) of a tile of `rows` queries from position p0 that see key position k.
struct QueryRange {
  int lo, hi;
};

// One batch row's visibility (the mask's row; null: causal).
class Visibility {
 public:
  Visibility(DocumentMask mask, int b)
      : first_(mask.start ? mask.start + static_cast<std::size_t>(b) * mask.stride : nullptr) {}
  int first(int p) const { return first_ ? first_[p] : 0; }
  // Causal: the queries at or after k. Documents: of those, the ones whose document starts at or
  // before k -- a prefix of the tile, since first() is nondecreasing.
  QueryRange queries(int k, int p0, int rows) const {
    const int lo = std::clamp(k - p0, 0, rows);
    int hi = rows;
    if (first_) {
      while (hi > lo && first_[p0 + hi - 1] > k) --hi;
    }
    return {lo, hi};
  }

 private:
  const std::int32_t* first_;
};

template <typename T, typename Fn>
void for_each_key_tile(std::span<const KVBlock<T>> blocks, const Visibility& vis, int q0, int q1,
                       Fn&& fn) {
  const int lo = vis.first(q0), last_first = vis.first(q1 - 1);
  int pos = 0;
  for (int bi = 0; bi < static_cast<int>(blocks.size()) && pos < q1; ++bi) {
    const int length = blocks[bi].length;
    // The block's first tile holding a key at or after lo: tiles keep the block's grid.
    const int first_row = lo > pos ? (lo - pos) / kBk * kBk : 0;
    for (int row = first_row; row < length && pos + row < q1; row += kBk) {
      // Keys at or past q1 are seen by no query of the range: cut the tile there.
      const KeyTile t{bi, row, pos + row, std::min({kBk, length - row, q1 - (pos + row)})};
      fn(t, t.pos + t.length - 1 > q0 || t.pos < last_first);
    }
    pos += length;
  }
}

// Where a (batch row, K/V head) slice of a K/V block starts; V is ckv further on.
template <typename T>
std::size_t kv_offset(const KVBlock<T>& blk, const Geometry& g, int b, int j) {
  return static_cast<std::size_t>(b) * blk.length * 2 * g.ckv + static_cast<std::size_t>(j) * g.d;
}

// ---- The tiles' products, in two forms the loops below take as a parameter (`Tiles`):
// WidenedTiles<T> widens every tile of T to Acc<T> and multiplies in Acc<T> (tile_product.h; the
// fp64 and fp32 kernels, and bf16 without AVX-512 BF16), DpBf16Tiles multiplies bf16 tiles with
// vdpbf16ps (attention_dpbf16.h). Each carves its own part of a thread's scratch (first
// `forward_elements` / `backward_elements` Acc<T> of it) and computes, for one query tile of
// `rows` queries and one key tile of `length` keys (the scores held transposed, keys by queries,
// row length kBq):
//   forward:  load_queries(q); scores(st, k) = S^T = k q^T / sqrt(d); accumulate_pv(acc, P^T, v):
//             acc += P v;
//   backward: load_queries(q, dout); scores(pt, k); accumulate_dv(dv, P^T): dv += P^T dout;
//             dp_scores(dst, v) = dP^T = v dout^T; accumulate_dk_dq(dk, dqa, dS^T, k):
//             dk += dS^T q / sqrt(d), dqa += dS k (dq = dqa * dq_scale() at the end).
// The `free` argument is a buffer of the loops' that is dead during the call (kBk * kBq Acc<T>),
// which a form may use as scratch.

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

// Inputs widened to W exactly as a tile is loaded; the query tile is loaded scaled by 1/sqrt(d)
// (in W), so S^T = k (q / sqrt(d))^T is one product and dk needs no scaling; the scores are
// held transposed so that K and V are the left operand of their products, read where they lie
// (tile_product.h broadcasts the left operand one element at a time), and only the query tile
// is transposed, once for all its key tiles.
template <typename T>
class WidenedTiles {
 public:
  using W = Acc<T>;
  static std::size_t forward_elements(int d, int dp) {
    return static_cast<std::size_t>(d) * kBq + static_cast<std::size_t>(kBk) * dp;
  }
  static std::size_t backward_elements(int d, int dp) {
    return 2 * static_cast<std::size_t>(d) * kBq + static_cast<std::size_t>(2 * kBq + kBk) * dp;
  }

  WidenedTiles(W* scratch, int d, int dp, int ldkv, bool backward)
      : d_(d), dp_(dp), ldkv_(ldkv), scale_(W(1) / std::sqrt(W(d))) {
    qt_ = scratch;                                      // (d, Bq) (q / sqrt(d))^T
    kr_ = qt_ + static_cast<std::size_t>(d) * kBq;      // (Bk, dp) V (forward) or K rows
    if (!backward) return;
    dot_ = kr_ + static_cast<std::size_t>(kBk) * dp;    // (d, Bq) dout^T
    qr_ = dot_ + static_cast<std::size_t>(d) * kBq;     // (Bq, dp) q / sqrt(d)
    dor_ = qr_ + static_cast<std::size_t>(kBq) * dp;    // (Bq, dp) dout
  }

  void load_queries(const T* q, std::size_t ld, int rows) {
    load_transposed(qt_, kBq, q, ld, rows, d_, scale_);
  }
  void load_queries(const T* q, const T* dout, std::size_t ld, int rows) {
    load_queries(q, ld, rows);
    load_transposed(dot_, kBq, dout, ld, rows, d_, W(1));
    load_rows(qr_, dp_, q, ld, rows, d_, scale_);
    load_rows(dor_, dp_, dout, ld, rows, d_, W(1));
  }
  void scores(W* st, const T* k, int length, int rows) {
    tile::product(length, rows, d_, k, ldkv_, 1, qt_, kBq, st, kBq, false);
  }
  void accumulate_pv(W* acc, const W* pt, const T* v, int length, int rows) {
    load_rows(kr_, dp_, v, ldkv_, length, d_, W(1));
    tile::product(rows, d_, length, pt, 1, kBq, kr_, dp_, acc, dp_, true);  // A = P^T transposed
  }
  void accumulate_dv(W* dv, const W* pt, int length, int rows, W* /*free*/) {
    tile::product(length, d_, rows, pt, kBq, 1, dor_, dp_, dv, ldkv_, true);
  }
  void dp_scores(W* dst, const T* v, int length, int rows) {
    tile::product(length, rows, d_, v, ldkv_, 1, dot_, kBq, dst, kBq, false);
  }
  void accumulate_dk_dq(W* dk, W* dqa, const W* ds, const T* k, int length, int rows,
                        W* /*free*/) {
    load_rows(kr_, dp_, k, ldkv_, length, d_, W(1));
    tile::product(length, d_, rows, ds, kBq, 1, qr_, dp_, dk, ldkv_, true);
    tile::product(rows, d_, length, ds, 1, kBq, kr_, dp_, dqa, dp_, true);  // A = dS^T transposed
  }
  W dq_scale() const { return scale_; }  // dq = dS k / sqrt(d), scaled once at the end

 private:
  int d_, dp_, ldkv_;
  W scale_;
  W *qt_, *kr_, *dot_ = nullptr, *qr_ = nullptr, *dor_ = nullptr;
};

// ---- The softmax down the columns of S^T, a query per SIMD lane.

// Masks S^T's entries that the query does not see with -infinity (so they take no part in a
// maximum and mark themselves for exp_masked).
template <typename W>
void mask_scores(W* st, const KeyTile& t, const Visibility& visibility, int p0, int rows) {
  for (int x = 0; x < t.length; ++x) {
    const QueryRange vis = visibility.queries(t.pos + x, p0, rows);
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

// The forward with the tiles' products of `Tiles` (above).
template <typename Tiles, typename T>
void forward_tiles(T* out, Acc<T>* lse, const T* q, std::span<const KVBlock<T>> blocks, int batch,
                   int s, int c, int heads, int kv_heads, DocumentMask mask) {
  using W = Acc<T>;
  const Geometry g = geometry(blocks, batch, s, c, heads, kv_heads, mask);
  const int d = g.d, dp = g.dp;
  const std::size_t ldkv = 2 * static_cast<std::size_t>(g.ckv);
  const int items = batch * heads * g.qtiles;
  constexpr W kNoMax = -std::numeric_limits<W>::infinity();
#pragma omp parallel if (parallel_worthwhile(g.work))
  {
    // This thread's tiles: the products' own (Tiles::forward_elements), then the loop's
    // (spec::attention_forward_tile_elements with the widened products).
    const std::size_t own = Tiles::forward_elements(d, dp);
    std::vector<W> scratch(own + static_cast<std::size_t>(kBq) * dp + kBk * kBq + 4 * kBq);
    Tiles tiles(scratch.data(), d, dp, static_cast<int>(ldkv), false);
    W* acc = scratch.data() + own;  // (Bq, dp) unnormalised output
    W* st = acc + kBq * dp;         // (Bk, Bq) S^T, then P^T
    W* m = st + kBk * kBq;          // (Bq) running maximum of each query
    W* l = m + kBq;                 // (Bq) running sum
    W* mt = l + kBq;                // (Bq) the maximum with this key tile
    W* alpha = mt + kBq;            // (Bq) rescaling of acc and l
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
      tiles.load_queries(q + row_offset, c, rows);
      zero(acc, acc + static_cast<std::size_t>(rows) * dp);
      std::fill(m, m + rows, kNoMax);
      zero(l, l + rows);
      const Visibility vis(mask, b);
      for_each_key_tile(blocks, vis, p0, p0 + rows, [&](const KeyTile& t, bool masked) {
        const KVBlock<T>& blk = blocks[t.block];
        const T* k = blk.kv + kv_offset(blk, g, b, j) + t.row * ldkv;
        tiles.scores(st, k, t.length, rows);  // S^T = k q^T / sqrt(d)
        if (masked) mask_scores(st, t, vis, p0, rows);
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
          // A query that saw no key of the tile nor before (an earlier document's tile, under a
          // document mask) has l = 0 exactly: its maximum stays -inf for the next tile's shift.
          if (m[i] == mt[i] || l[i] == W(0)) continue;
          W* a = acc + static_cast<std::size_t>(i) * dp;
          const W f = alpha[i];
#pragma omp simd
          for (int x = 0; x < d; ++x) a[x] *= f;
          m[i] = mt[i];
        }
        tiles.accumulate_pv(acc, st, k + g.ckv, t.length, rows);  // acc += P v
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

// The backward with the tiles' products of `Tiles` (above).
template <typename Tiles, typename T>
void backward_tiles(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                    const T* out, const Acc<T>* lse, int batch, int s, int c, int heads,
                    int kv_heads, Acc<T>* workspace, DocumentMask mask) {
  using W = Acc<T>;
  const Geometry g = geometry(blocks, batch, s, c, heads, kv_heads, mask);
  const int d = g.d, dp = g.dp;
  const std::size_t ldkv = 2 * static_cast<std::size_t>(g.ckv);
  const std::size_t per_thread = spec::attention_backward_tile_elements(d);
  // The products' own scratch, then the loop's (together spec::attention_backward_tile_elements
  // with the widened products; the bf16 ones need no more).
  const std::size_t own = Tiles::backward_elements(d, dp);
  if (own + static_cast<std::size_t>(kBq) * dp + 2 * kBk * kBq + 2 * kBq > per_thread) {
    throw Error("attention_backward: the tile products need more scratch than "
                "spec::attention_backward_tile_elements(" + std::to_string(d) + ") counts");
  }
  // One (batch row, K/V head) per item: the query heads of its group and their query tiles run
  // in order on one thread because they all accumulate into the same dk/dv slice (fixed order:
  // deterministic, and no two threads write the same dk/dv).
#pragma omp parallel for schedule(dynamic, 1) if (parallel_worthwhile(g.work))
  for (int item = 0; item < batch * kv_heads; ++item) {
    const int j = item % kv_heads;
    const int b = item / kv_heads;
    W* scratch = workspace + static_cast<std::size_t>(omp_get_thread_num()) * per_thread;
    Tiles tiles(scratch, d, dp, static_cast<int>(ldkv), true);
    W* dqa = scratch + own;    // (Bq, dp) dq accumulator
    W* pt = dqa + kBq * dp;    // (Bk, Bq) P^T
    W* dst = pt + kBk * kBq;   // (Bk, Bq) dP^T, then dS^T
    W* dd = dst + kBk * kBq;   // (Bq) D
    W* ls = dd + kBq;          // (Bq) lse
    const Visibility vis(mask, b);
    for (int h = j * g.group; h < (j + 1) * g.group; ++h) {
      for (int qtile = 0; qtile < g.qtiles; ++qtile) {
        const int r0 = qtile * kBq;
        const int rows = std::min(s, r0 + kBq) - r0;
        const int p0 = g.start + r0;
        const std::size_t row_offset = (static_cast<std::size_t>(b) * s + r0) * c + h * d;
        tiles.load_queries(q + row_offset, dout + row_offset, c, rows);
        zero(dqa, dqa + static_cast<std::size_t>(rows) * dp);
        const W* lse_rows = lse + (static_cast<std::size_t>(b) * heads + h) * s + r0;
        // D = rowsum(dout * out) (FlashAttention-2 Algorithm 2, line 4).
        for (int r = 0; r < rows; ++r) {
          const T* o = out + row_offset + static_cast<std::size_t>(r) * c;
          const T* g_r = dout + row_offset + static_cast<std::size_t>(r) * c;
          W sum = 0;
          for (int x = 0; x < d; ++x) sum += static_cast<W>(g_r[x]) * static_cast<W>(o[x]);
          dd[r] = sum;
          ls[r] = lse_rows[r];
        }
        for_each_key_tile(blocks, vis, p0, p0 + rows, [&](const KeyTile& t, bool masked) {
          const KVBlock<T>& blk = blocks[t.block];
          const std::size_t off = kv_offset(blk, g, b, j) + t.row * ldkv;
          const T* k = blk.kv + off;
          W* dk = blk.dkv + off;
          // P^T = exp(k q^T / sqrt(d) - lse), zero where a query does not see the key.
          tiles.scores(pt, k, t.length, rows);
          if (masked) mask_scores(pt, t, vis, p0, rows);
          exp_shifted(pt, ls, t.length, rows, masked);
          tiles.accumulate_dv(dk + g.ckv, pt, t.length, rows, dst);  // dv += P^T dout
          // dP^T = v dout^T; dS^T = P^T * (dP^T - D).
          tiles.dp_scores(dst, k + g.ckv, t.length, rows);
          for (int x = 0; x < t.length; ++x) {
            W* dsr = dst + x * kBq;
            const W* pr = pt + x * kBq;
#pragma omp simd
            for (int i = 0; i < rows; ++i) dsr[i] = pr[i] * (dsr[i] - dd[i]);
          }
          // dk += dS^T q / sqrt(d); dq += dS k (P^T is dead: free for the products).
          tiles.accumulate_dk_dq(dk, dqa, dst, k, t.length, rows, pt);
        });
        const W dq_scale = tiles.dq_scale();
        for (int r = 0; r < rows; ++r) {
          const W* a = dqa + static_cast<std::size_t>(r) * dp;
          T* o = dq + row_offset + static_cast<std::size_t>(r) * c;
          for (int x = 0; x < d; ++x) o[x] = T(a[x] * dq_scale);
        }
      }
    }
  }
}

}  // namespace

// bf16 takes the vdpbf16ps products where this process may (attention_path.h).
template <typename T>
void attention_forward(T* out, Acc<T>* lse, const T* q, std::span<const KVBlock<T>> blocks,
                       int batch, int s, int c, int heads, int kv_heads, DocumentMask mask) {
#if defined(PLAIT_TILE_DPBF16)
  if constexpr (std::is_same_v<T, bf16>) {
    if (attention_bf16_path() == AttentionBf16Path::kDpBf16) {
      forward_tiles<DpBf16Tiles>(out, lse, q, blocks, batch, s, c, heads, kv_heads, mask);
      return;
    }
  }
#endif
  forward_tiles<WidenedTiles<T>>(out, lse, q, blocks, batch, s, c, heads, kv_heads, mask);
}

template <typename T>
void attention_backward(T* dq, std::span<const KVBlock<T>> blocks, const T* dout, const T* q,
                        const T* out, const Acc<T>* lse, int batch, int s, int c, int heads,
                        int kv_heads, Acc<T>* workspace, DocumentMask mask) {
#if defined(PLAIT_TILE_DPBF16)
  if constexpr (std::is_same_v<T, bf16>) {
    if (attention_bf16_path() == AttentionBf16Path::kDpBf16) {
      backward_tiles<DpBf16Tiles>(dq, blocks, dout, q, out, lse, batch, s, c, heads, kv_heads,
                                  workspace, mask);
      return;
    }
  }
#endif
  backward_tiles<WidenedTiles<T>>(dq, blocks, dout, q, out, lse, batch, s, c, heads, kv_heads,
                                  workspace, mask);
}

#define PLAIT_ATTENTION_INSTANTIATE(T)                                                        \
  template void attention_forward<T>(T*, Acc<T>*, const T*, std::span<const KVBlock<T>>, int, \
                                     int, int, int, int, DocumentMask);                       \
  template void attention_backward<T>(T*, std::span<const KVBlock<T>>, const T*, const T*,    \
                                      const T*, const Acc<T>*, int, int, int, int, int,       \
                                      Acc<T>*, DocumentMask);
PLAIT_ATTENTION_INSTANTIATE(double)
PLAIT_ATTENTION_INSTANTIATE(float)
PLAIT_ATTENTION_INSTANTIATE(bf16)
#undef PLAIT_ATTENTION_INSTANTIATE

}  // namespace plait::kernels
