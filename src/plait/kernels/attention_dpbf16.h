#pragma once
// The bf16 attention's tile products on AVX-512 BF16 (vdpbf16ps, tile_product_bf16.h): the
// `Tiles` form that kernels/attention.cpp's loops take for T = bf16 where attention_path.h says
// so; included by attention.cpp alone. The interface is WidenedTiles's (attention.cpp, "The
// tiles' products"); what differs is the arithmetic:
//
// - The score products S^T = K q^T and dP^T = V dout^T read K, V (where they lie) and q, dout
//   as bf16 pairs along the head dimension: exact products, fp32 sums, as the widened form but
//   two terms per instruction. The scale 1/sqrt(d) multiplies the fp32 scores after the product
//   (alpha of the product), so q is never rounded after scaling.
// - The products with P or dS (acc += P V, dv += P^T dout, dk += dS^T q, dq += dS k) round P and
//   dS to bf16 first (nearest even), as FlashAttention-2 does on GPUs (its tensor-core MMAs take
//   P and dS in the input type; Dao 2023, arXiv 2307.08691, section 3.1 and the CUDA kernels),
//   then fp32 sums. dS is rounded once, already scaled by 1/sqrt(d) (scale * dS in fp32), so dk
//   and dq need no scaling after (dq_scale() = 1). Each of these products' terms thus carries
//   one more rounding (u = 2^-8 of P or dS) than the widened form's; the log-sum-exp, the
//   online-softmax statistics, D and the dK/dV/dq accumulators stay fp32 exactly as there.
//
// Operands go into vdpbf16ps's pair layouts once per tile: q and dout (per query tile) as pairs
// along d for the score products and as row pairs for dv and dk; V (forward) and K (backward,
// for dq) as row pairs per key tile; P and dS rounded into rows (pairs along queries) or row
// pairs (pairs along keys) as their products need. A head dimension d that is odd has no whole
// last pair in K and V: such rows are copied with a zero pad column first.
//
// Scratch. Forward (allocated per call, untracked): q^T pairs ceil(d/2) x Bq, V row pairs Bk/2 x
// dp, P row pairs Bk/2 x Bq (32-bit pairs; fewer bytes than the widened form's d Bq + Bk dp
// floats for d >= 32). Backward, within spec::attention_backward_tile_elements: q^T and dout^T
// pairs (ceil(d/2) x Bq each), q and dout row pairs (Bq/2 x dp each), K row pairs (Bk/2 x dp),
// at most the widened form's own part; the rounded P^T goes to the loop's dS^T buffer before dP^T
// is written there, and the rounded dS to the P^T buffer after dS is formed (the `free`
// arguments).
#include "plait/kernels/tile_product_bf16.h"

#if defined(PLAIT_TILE_DPBF16)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plait/core/bf16.h"
#include "plait/spec/attention_tiles.h"

namespace plait::kernels {

class DpBf16Tiles {
 public:
  using W = float;
  static constexpr int kBq = spec::kAttentionQueryTile, kBk = spec::kAttentionKeyTile;
  static_assert(kBq % 32 == 0 && kBk % 2 == 0, "round_rows writes rows of 32 bf16");

  static std::size_t forward_elements(int d, int dp) {
    return pairs(d) * kBq + static_cast<std::size_t>(kBk / 2) * dp + (kBk / 2) * kBq;
  }
  static std::size_t backward_elements(int d, int dp) {
    return 2 * pairs(d) * kBq + static_cast<std::size_t>(kBq + kBk / 2) * dp;
  }

  DpBf16Tiles(float* scratch, int d, int dp, int ldkv, bool backward)
      : d_(d), dp_(dp), ldkv_(ldkv), scale_(1.0f / std::sqrt(float(d))) {
    auto* words = reinterpret_cast<std::uint32_t*>(scratch);
    qt_ = words;                                  // (ceil(d/2), Bq) q^T pairs
    kv_ = qt_ + pairs(d) * kBq;                   // (Bk/2, dp) V or K row pairs; odd-d copies
    if (!backward) {
      pv_ = kv_ + static_cast<std::size_t>(kBk / 2) * dp;  // (Bk/2, Bq) P row pairs
      return;
    }
    dot_ = kv_ + static_cast<std::size_t>(kBk / 2) * dp;   // (ceil(d/2), Bq) dout^T pairs
    qr_ = dot_ + pairs(d) * kBq;                           // (Bq/2, dp) q row pairs
    dor_ = qr_ + static_cast<std::size_t>(kBq / 2) * dp;   // (Bq/2, dp) dout row pairs
  }

  void load_queries(const bf16* q, std::size_t ld, int rows) {
    tile_bf16::pack_pairs_transposed(qt_, kBq, q, ld, rows, d_);
  }
  void load_queries(const bf16* q, const bf16* dout, std::size_t ld, int rows) {
    load_queries(q, ld, rows);
    tile_bf16::pack_pairs_transposed(dot_, kBq, dout, ld, rows, d_);
    tile_bf16::pack_row_pairs(qr_, dp_, q, ld, rows, d_);
    tile_bf16::pack_row_pairs(dor_, dp_, dout, ld, rows, d_);
  }
  // S^T = (k q^T) / sqrt(d), the scale in fp32 on the product.
  void scores(float* st, const bf16* k, int length, int rows) {
    int ld = ldkv_;
    const bf16* a = whole_pairs(k, length, ld);
    tile_bf16::product(length, rows, pairs(d_), a, ld, 2, qt_, kBq, st, kBq, scale_, false);
  }
  void accumulate_pv(float* acc, const float* pt, const bf16* v, int length, int rows) {
    tile_bf16::pack_row_pairs(kv_, dp_, v, ldkv_, length, d_);
    tile_bf16::round_row_pairs(pv_, kBq, pt, kBq, length, rows, 1.0f);
    tile_bf16::product(rows, d_, pairs(length), as_bf16(pv_), 2, 2 * kBq, kv_, dp_, acc, dp_, 1.0f,
                       true);
  }
  void accumulate_dv(float* dv, const float* pt, int length, int rows, float* free) {
    bf16* p = reinterpret_cast<bf16*>(free);  // (Bk, Bq) P^T rounded
    tile_bf16::round_rows(p, kBq, pt, kBq, length, rows, 1.0f);
    tile_bf16::product(length, d_, pairs(rows), p, kBq, 2, dor_, dp_, dv, ldkv_, 1.0f, true);
  }
  void dp_scores(float* dst, const bf16* v, int length, int rows) {
    int ld = ldkv_;
    const bf16* a = whole_pairs(v, length, ld);
    tile_bf16::product(length, rows, pairs(d_), a, ld, 2, dot_, kBq, dst, kBq, 1.0f, false);
  }
  void accumulate_dk_dq(float* dk, float* dqa, const float* ds, const bf16* k, int length,
                        int rows, float* free) {
    bf16* rows_ds = reinterpret_cast<bf16*>(free);  // (Bk, Bq) dS^T / sqrt(d) rounded
    auto* pairs_ds = reinterpret_cast<std::uint32_t*>(free + kBk * kBq / 2);  // (Bk/2, Bq) of dS
    tile_bf16::round_rows(rows_ds, kBq, ds, kBq, length, rows, scale_);
    tile_bf16::round_row_pairs(pairs_ds, kBq, ds, kBq, length, rows, scale_);
    tile_bf16::pack_row_pairs(kv_, dp_, k, ldkv_, length, d_);
    tile_bf16::product(length, d_, pairs(rows), rows_ds, kBq, 2, qr_, dp_, dk, ldkv_, 1.0f, true);
    tile_bf16::product(rows, d_, pairs(length), as_bf16(pairs_ds), 2, 2 * kBq, kv_, dp_, dqa, dp_,
                       1.0f, true);
  }
  float dq_scale() const { return 1.0f; }  // dS was scaled before its rounding

 private:
  static std::size_t pairs(int n) { return static_cast<std::size_t>(n + 1) / 2; }
  static const bf16* as_bf16(const std::uint32_t* p) { return reinterpret_cast<const bf16*>(p); }

  // Rows of K or V whose last pair lies within the head: where they are (d even), or copied
  // with a zero pad column into the row-pair buffer (free during the score products), ld set to
  // the rows' stride.
  const bf16* whole_pairs(const bf16* src, int length, int& ld) {
    if (d_ % 2 == 0) return src;
    bf16* copy = reinterpret_cast<bf16*>(kv_);
    for (int x = 0; x < length; ++x) {
      std::memcpy(copy + static_cast<std::size_t>(x) * (d_ + 1), src + static_cast<std::size_t>(x) * ld,
                  sizeof(bf16) * d_);
      copy[static_cast<std::size_t>(x) * (d_ + 1) + d_] = bf16();
    }
    ld = d_ + 1;
    return copy;
  }

  int d_, dp_, ldkv_;
  float scale_;
  std::uint32_t *qt_, *kv_, *pv_ = nullptr, *dot_ = nullptr, *qr_ = nullptr, *dor_ = nullptr;
};

}  // namespace plait::kernels

#endif
