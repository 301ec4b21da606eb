#pragma once
// C (m, n) = alpha A (m, k) B (k, n) [+ C] for the bf16 tiles of the tiled attention
// (kernels/attention_dpbf16.h), on AVX-512 BF16's dot product: vdpbf16ps (_mm512_dpbf16_ps)
// takes two bf16 of each operand per 32-bit lane and adds their two products to an fp32 lane,
// acc[j] += a[2j] b[2j] + a[2j+1] b[2j+1] (Intel SDM, VDPBF16PS; the products of two bf16 are
// exact in fp32, each addition rounds to nearest even, denormal inputs and outputs are flushed
// to zero). So k runs in pairs: kp = ceil(k / 2) steps, each worth two of tile_product.h's
// rank-1 updates. The blocking is the same GotoBLAS scheme (Goto & van de Geijn, ACM TOMS 34(3),
// 2008): an MR x NV-vector block of C in fp32 registers, one pair of A broadcast per row, one
// pair-interleaved row of B per vector.
//
//   A(r, p) = the bf16 pair at a + r * ars + p * acs   (strides in bf16 elements: a row of K
//             read where it lies is ars = its row length, acs = 2; a pair-interleaved tile
//             ars = 2, acs = 2 * its width)
//   B(p, j) = the pair at b + p * ldb + j              (in pairs: row 2p and 2p+1 of B
//             interleaved, rows padded with zero pairs to whole vectors of 16)
//   C(r, j) = c[r * ldc + j], only columns [0, n) are read or written (masked).
//
// The packers below build the pair layouts once per tile; the result depends on the operands
// alone, never on threads. Compiled only where the compiler targets AVX-512 BF16 (with BW and
// VL for the 16-bit moves): PLAIT_TILE_DPBF16 says so. Whether the CPU running the binary has it
// is a run-time question (kernels/attention_path.h).
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define PLAIT_TILE_DPBF16 1

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plait/core/bf16.h"

namespace plait::kernels::tile_bf16 {

inline constexpr int kLanes = 16;  // fp32 lanes, = bf16 pairs, of a 512-bit vector

// Rows of C held in registers per block, and vectors per row: 6 x 4 accumulators, 4 B vectors
// and a broadcast fit AVX-512's 32 registers, and a 64-column tile is one panel.
inline constexpr int kBlockRows = 6;
inline constexpr int kBlockVectors = 4;

inline __mmask16 lanes_below(int n) {
  return n >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << std::max(n, 0)) - 1u);
}

inline __m512bh pair_at(const bf16* p) {
  std::uint32_t w;
  std::memcpy(&w, p, sizeof(w));
  return (__m512bh)_mm512_set1_epi32(static_cast<int>(w));
}

// One MR x NV-vector block of C; `n` (> (NV-1) * 16) valid columns of it.
template <int MR, int NV>
inline void block(int kp, const bf16* a, int ars, int acs, const std::uint32_t* b, int ldb,
                  float* c, int ldc, int n, float alpha, bool accumulate) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int p = 0; p < kp; ++p) {
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) {
      bv[v] = (__m512bh)_mm512_loadu_si512(b + static_cast<std::size_t>(p) * ldb + v * kLanes);
    }
    for (int r = 0; r < MR; ++r) {
      const __m512bh ar = pair_at(a + static_cast<std::size_t>(r) * ars + static_cast<std::size_t>(p) * acs);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      float* cr = c + static_cast<std::size_t>(r) * ldc + v * kLanes;
      const __mmask16 m = lanes_below(n - v * kLanes);
      __m512 x = alpha == 1.0f ? acc[r][v] : _mm512_mul_ps(acc[r][v], scale);
      if (accumulate) x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, cr), x);
      _mm512_mask_storeu_ps(cr, m, x);
    }
  }
}

// The rows [0, m) of one panel of NV vectors, the last block of fewer than MR rows by its own
// instantiation.
template <int NV>
inline void panel(int m, int kp, const bf16* a, int ars, int acs, const std::uint32_t* b, int ldb,
                  float* c, int ldc, int n, float alpha, bool accumulate) {
  int r = 0;
  for (; r + kBlockRows <= m; r += kBlockRows) {
    block<kBlockRows, NV>(kp, a + static_cast<std::size_t>(r) * ars, ars, acs, b, ldb,
                          c + static_cast<std::size_t>(r) * ldc, ldc, n, alpha, accumulate);
  }
  const bf16* ar = a + static_cast<std::size_t>(r) * ars;
  float* cr = c + static_cast<std::size_t>(r) * ldc;
  switch (m - r) {
    case 1: block<1, NV>(kp, ar, ars, acs, b, ldb, cr, ldc, n, alpha, accumulate); break;
    case 2: block<2, NV>(kp, ar, ars, acs, b, ldb, cr, ldc, n, alpha, accumulate); break;
    case 3: block<3, NV>(kp, ar, ars, acs, b, ldb, cr, ldc, n, alpha, accumulate); break;
    case 4: block<4, NV>(kp, ar, ars, acs, b, ldb, cr, ldc, n, alpha, accumulate); break;
    case 5: block<5, NV>(kp, ar, ars, acs, b, ldb, cr, ldc, n, alpha, accumulate); break;
    default: break;
  }
}
static_assert(kBlockRows == 6, "panel() dispatches remainders of 1..5 rows");

// C (m, n) = alpha A (m, 2 kp) B (2 kp, n) [+ C], layouts as above. Note the accumulation: the
// block sums its kp pairs from zero and adds the (scaled) sum to C once.
inline void product(int m, int n, int kp, const bf16* a, int ars, int acs, const std::uint32_t* b,
                    int ldb, float* c, int ldc, float alpha, bool accumulate) {
  constexpr int panel_cols = kBlockVectors * kLanes;
  for (int j = 0; j < n; j += panel_cols) {
    const int cols = std::min(panel_cols, n - j);
    const int vectors = (cols + kLanes - 1) / kLanes;
    switch (vectors) {
      case 4: panel<4>(m, kp, a, ars, acs, b + j, ldb, c + j, ldc, cols, alpha, accumulate); break;
      case 3: panel<3>(m, kp, a, ars, acs, b + j, ldb, c + j, ldc, cols, alpha, accumulate); break;
      case 2: panel<2>(m, kp, a, ars, acs, b + j, ldb, c + j, ldc, cols, alpha, accumulate); break;
      default: panel<1>(m, kp, a, ars, acs, b + j, ldb, c + j, ldc, cols, alpha, accumulate); break;
    }
  }
}
static_assert(kBlockVectors == 4, "product() dispatches panels of 1..4 vectors");

// ---- Packers into the pair layouts (all pad with zero pairs, so the products read whole
// vectors and an odd k adds a zero product).

// dst (ceil(cols/2), ld pairs): dst[p * ld + r] = (src[r][2p], src[r][2p+1]), r < rows; pairs
// [rows, ld) zero. A bf16 tile whose rows are pairs along k already (q or dout, k = the head
// dimension), transposed at the granularity of a pair: the B operand of S^T = K q^T.
inline void pack_pairs_transposed(std::uint32_t* dst, int ld, const bf16* src, std::size_t lds,
                                  int rows, int cols) {
  const int pairs = cols / 2;
  for (int p = 0; p < (cols + 1) / 2; ++p) {
    std::uint32_t* row = dst + static_cast<std::size_t>(p) * ld;
    std::fill(row + rows, row + ld, 0u);
  }
  for (int r = 0; r < rows; ++r) {
    const bf16* in = src + r * lds;
    for (int p = 0; p < pairs; ++p) {
      std::uint32_t w;
      std::memcpy(&w, in + 2 * p, sizeof(w));
      dst[static_cast<std::size_t>(p) * ld + r] = w;
    }
    if (cols % 2) dst[static_cast<std::size_t>(pairs) * ld + r] = in[cols - 1].bits;
  }
}

// dst (ceil(rows/2), ld pairs): dst[p * ld + j] = (src[2p][j], src[2p+1][j]), j < cols (a
// missing row 2p+1 is zero); pairs [cols, ld) zero, ld a multiple of 16. Rows of a bf16 tile
// interleaved two by two: the B operand when k runs over the tile's rows (V in P V, K in dS K,
// dout in P^T dout, q in dS^T q).
inline void pack_row_pairs(std::uint32_t* dst, int ld, const bf16* src, std::size_t lds, int rows,
                           int cols) {
  for (int p = 0; 2 * p < rows; ++p) {
    const bf16* r0 = src + 2 * p * lds;
    const bf16* r1 = 2 * p + 1 < rows ? r0 + lds : nullptr;
    for (int j = 0; j < ld; j += kLanes) {
      const __mmask16 m = lanes_below(cols - j);
      // (The masked forms of the widening and the shift: GCC 12 warns on the unmasked ones'
      // undefined pass-through.)
      const __m512i lo = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r0 + j));
      const __m512i hi = r1 ? _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r1 + j))
                            : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + static_cast<std::size_t>(p) * ld + j,
                          _mm512_or_si512(lo, _mm512_maskz_slli_epi32(m, hi, 16)));
    }
  }
}

// dst (rows, ld bf16): dst[x * ld + i] = bf16(alpha * src[x * lds + i]), i < cols, rounded to
// nearest even; [cols, cols rounded up to 32) zero (ld a multiple of 32). fp32 rows (P^T, dS^T)
// whose pairs along the row become the A operand read with ars = ld, acs = 2.
inline void round_rows(bf16* dst, int ld, const float* src, int lds, int rows, int cols,
                       float alpha) {
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int x = 0; x < rows; ++x) {
    const float* in = src + static_cast<std::size_t>(x) * lds;
    bf16* out = dst + static_cast<std::size_t>(x) * ld;
    for (int i = 0; i < cols; i += 2 * kLanes) {
      const __m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes_below(cols - i), in + i), scale);
      const __m512 hi =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes_below(cols - i - kLanes), in + i + kLanes), scale);
      _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

// dst (ceil(rows/2), ld pairs): dst[p * ld + i] = (bf16(alpha src[2p][i]), bf16(alpha
// src[2p+1][i])), i < cols (a missing row 2p+1 is zero); [cols, cols rounded up to 16) zero.
// fp32 rows (P^T, dS^T: keys by queries) rounded and interleaved two by two: the A operand of
// P V and dS K (k over keys), read with ars = 2, acs = 2 * ld.
inline void round_row_pairs(std::uint32_t* dst, int ld, const float* src, int lds, int rows,
                            int cols, float alpha) {
  // vcvtne2ps2bf16 puts the 16 roundings of its second operand below those of its first; this
  // index interleaves them: word 2j <- j (row 2p), word 2j+1 <- 16 + j (row 2p+1).
  alignas(64) std::uint16_t index[2 * kLanes];
  for (int j = 0; j < kLanes; ++j) {
    index[2 * j] = static_cast<std::uint16_t>(j);
    index[2 * j + 1] = static_cast<std::uint16_t>(kLanes + j);
  }
  const __m512i interleave = _mm512_load_si512(index);
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int p = 0; 2 * p < rows; ++p) {
    const float* r0 = src + static_cast<std::size_t>(2 * p) * lds;
    const float* r1 = 2 * p + 1 < rows ? r0 + lds : nullptr;
    for (int i = 0; i < cols; i += kLanes) {
      const __mmask16 m = lanes_below(cols - i);
      const __m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, r0 + i), scale);
      const __m512 hi = r1 ? _mm512_mul_ps(_mm512_maskz_loadu_ps(m, r1 + i), scale) : _mm512_setzero_ps();
      const __m512i words = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      _mm512_storeu_si512(dst + static_cast<std::size_t>(p) * ld + i,
                          _mm512_permutexvar_epi16(interleave, words));
    }
  }
}

}  // namespace plait::kernels::tile_bf16

#endif
