#pragma once
// C (m, n) = [C +] A (m, k) B (k, n) for the small cache-resident tiles of the tiled attention
// (kernels/attention.cpp), in the accumulation type W (fp32, or fp64 for the tests' reference).
// A library GEMM per tile costs more in call overhead and packing than the tile's few hundred
// thousand multiply-adds, so this is a register-blocked kernel of its own, the classic GotoBLAS
// scheme (Goto & van de Geijn, ACM TOMS 34(3), 2008): an MR x (NV vectors) block of C stays in
// registers while k rank-1 updates stream one row of B and broadcast one element of A per row.
//
//   A(r, p) = a[r * ars + p * acs]   any strides and any element type TA (widened to W as it is
//                                    read): A is read one broadcast element at a time, so a
//                                    transposed operand (dS^T) is just swapped strides, and K or
//                                    V can be read where they lie, in bf16 too;
//   B(p, j) = b[p * ldb + j]         rows padded with zeros to a whole number of vectors (the
//                                    kernel loads whole vectors past column n);
//   C(r, j) = c[r * ldc + j]         only columns [0, n) are read or written.
//
// Portable: the vectors are GCC vector extensions of the widest unit the compiler targets
// (AVX-512: 64 bytes, AVX/AVX2: 32, otherwise 16), lowered to whatever the CPU has, with a fused
// multiply-add intrinsic where the target has FMA (the build's ISO C++ mode does not contract
// a * b + c by itself). The result depends only on the compile target, never on threads.
#include <algorithm>
#include <cstring>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

namespace plait::kernels::tile {

#if defined(__AVX512F__)
inline constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVectorBytes = 32;
#else
inline constexpr int kVectorBytes = 16;
#endif

template <typename W>
struct Vector {
  typedef W type __attribute__((vector_size(kVectorBytes)));
  static constexpr int lanes = kVectorBytes / static_cast<int>(sizeof(W));
};
template <typename W>
using Vec = typename Vector<W>::type;

template <typename V>
inline V fmadd(V a, V b, V c) {
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64 && sizeof(a[0]) == 4) return _mm512_fmadd_ps(a, b, c);
  if constexpr (sizeof(V) == 64 && sizeof(a[0]) == 8) return _mm512_fmadd_pd(a, b, c);
#elif defined(__FMA__)
  if constexpr (sizeof(V) == 32 && sizeof(a[0]) == 4) return _mm256_fmadd_ps(a, b, c);
  if constexpr (sizeof(V) == 32 && sizeof(a[0]) == 8) return _mm256_fmadd_pd(a, b, c);
#endif
  return a * b + c;
}

// Rows of C held in registers per block, and vectors per row: 12 accumulators, 2 B vectors and
// a broadcast fit AVX2's 16 registers as well as AVX-512's 32.
inline constexpr int kBlockRows = 6;
inline constexpr int kBlockVectors = 2;

// The first `cols` elements of x as a vector (the rest zero), and back: whole vectors by one
// unaligned move, a partial one element by element (a memcpy of variable size is a library
// call).
template <typename W>
inline Vec<W> load(const W* x, int cols) {
  Vec<W> v{};
  if (cols >= Vector<W>::lanes) {
    std::memcpy(&v, x, sizeof(v));
  } else {
    for (int i = 0; i < cols; ++i) v[i] = x[i];
  }
  return v;
}
template <typename W>
inline void store(W* x, Vec<W> v, int cols) {
  if (cols >= Vector<W>::lanes) {
    std::memcpy(x, &v, sizeof(v));
  } else {
    for (int i = 0; i < cols; ++i) x[i] = v[i];
  }
}

// One MR x NV-vector block of C; `n` (> (NV-1) * lanes) valid columns of it.
template <typename W, int MR, int NV, typename TA>
inline void block(int k, const TA* a, int ars, int acs, const W* b, int ldb, W* c, int ldc, int n,
                  bool accumulate) {
  using V = Vec<W>;
  constexpr int L = Vector<W>::lanes;
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load(c + r * ldc + v * L, n - v * L) : V{};
  }
  for (int p = 0; p < k; ++p) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + p * ldb + v * L, sizeof(V));
    for (int r = 0; r < MR; ++r) {
      const V ar = V{} + static_cast<W>(a[r * ars + p * acs]);
      for (int v = 0; v < NV; ++v) acc[r][v] = fmadd(ar, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) store(c + r * ldc + v * L, acc[r][v], n - v * L);
  }
}

// The rows [0, m) of one panel of NV vectors, the last block of fewer than MR rows by its own
// instantiation.
template <typename W, int NV, typename TA>
inline void panel(int m, int k, const TA* a, int ars, int acs, const W* b, int ldb, W* c, int ldc,
                  int n, bool accumulate) {
  int r = 0;
  for (; r + kBlockRows <= m; r += kBlockRows) {
    block<W, kBlockRows, NV>(k, a + r * ars, ars, acs, b, ldb, c + r * ldc, ldc, n, accumulate);
  }
  const TA* ar = a + r * ars;
  W* cr = c + r * ldc;
  switch (m - r) {
    case 1: block<W, 1, NV>(k, ar, ars, acs, b, ldb, cr, ldc, n, accumulate); break;
    case 2: block<W, 2, NV>(k, ar, ars, acs, b, ldb, cr, ldc, n, accumulate); break;
    case 3: block<W, 3, NV>(k, ar, ars, acs, b, ldb, cr, ldc, n, accumulate); break;
    case 4: block<W, 4, NV>(k, ar, ars, acs, b, ldb, cr, ldc, n, accumulate); break;
    case 5: block<W, 5, NV>(k, ar, ars, acs, b, ldb, cr, ldc, n, accumulate); break;
    default: break;
  }
}
static_assert(kBlockRows == 6, "panel() dispatches remainders of 1..5 rows");

// C (m, n) = [C +] A (m, k) B (k, n), strides as above. k == 0 leaves C (or zeroes it).
template <typename W, typename TA>
void product(int m, int n, int k, const TA* a, int ars, int acs, const W* b, int ldb, W* c,
             int ldc, bool accumulate) {
  constexpr int L = Vector<W>::lanes, panel_cols = kBlockVectors * L;
  for (int j = 0; j < n; j += panel_cols) {
    const int cols = std::min(panel_cols, n - j);
    if (cols > L) {
      panel<W, kBlockVectors>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, cols, accumulate);
    } else {
      panel<W, 1>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, cols, accumulate);
    }
  }
}

}  // namespace plait::kernels::tile
