#include "plait/kernels/widened_sgemm.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "plait/core/error.h"
#include "plait/kernels/blas.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {
namespace {

// out (rows, cols) row-major = the fp32 values of src's block at (r0, c0), src row-major with
// leading dimension ld.
void widen(float* out, const bf16* src, std::size_t ld, int r0, int rows, int c0, int cols) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{rows} * cols))
  for (int r = 0; r < rows; ++r) {
    const bf16* in = src + static_cast<std::size_t>(r0 + r) * ld + c0;
    float* o = out + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) o[c] = to_float(in[c]);
  }
}

// The fp32 accumulator of dst's tile (i0.., j0..; rows x cols, leading dimension ld) before the
// products: dst's old value (accumulate) + bias + residual, in that order.
void start_tile(float* acc, std::size_t ld, const Bf16MatmulShape& s, const Bf16MatmulArgs& args,
                int i0, int rows, int j0, int cols) {
  const auto n = static_cast<std::size_t>(s.n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{rows} * cols))
  for (int r = 0; r < rows; ++r) {
    float* a = acc + static_cast<std::size_t>(r) * ld;
    const std::size_t row = static_cast<std::size_t>(i0 + r) * n + j0;
    if (!s.accumulate) {
      for (int c = 0; c < cols; ++c) a[c] = 0.0f;
    } else if (!s.dst_fp32) {
      const bf16* old = static_cast<const bf16*>(args.dst) + row;
      for (int c = 0; c < cols; ++c) a[c] = to_float(old[c]);
    }  // an fp32 dst that accumulates is its own accumulator
    if (s.bias) {
      for (int c = 0; c < cols; ++c) a[c] += to_float(args.bias[j0 + c]);
    }
    if (s.residual) {
      const bf16* res = args.residual + row;
      for (int c = 0; c < cols; ++c) a[c] += to_float(res[c]);
    }
  }
}

// The one rounding of a bf16 dst's tile.
void store_tile(bf16* dst, std::size_t n, const float* acc, int i0, int rows, int j0, int cols) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{rows} * cols))
  for (int r = 0; r < rows; ++r) {
    bf16* d = dst + static_cast<std::size_t>(i0 + r) * n + j0;
    const float* a = acc + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) d[c] = bf16(a[c]);
  }
}

}  // namespace

void widened_sgemm(OneDnnContext& context, const Bf16MatmulShape& s, const Bf16MatmulArgs& args) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) throw Error("widened_sgemm: empty matmul");
  const int tm = std::min(s.m, kWidenedTileRows), tn = std::min(s.n, kWidenedTileCols),
            tk = std::min(s.k, kWidenedTileDepth);
  const std::size_t a_floats = static_cast<std::size_t>(tm) * tk;
  const std::size_t b_floats = static_cast<std::size_t>(tk) * tn;
  const std::size_t acc_floats = s.dst_fp32 ? 0 : static_cast<std::size_t>(tm) * tn;
  float* a_tile = static_cast<float*>(context.workspace((a_floats + b_floats + acc_floats) * sizeof(float)));
  float* b_tile = a_tile + a_floats;
  float* acc_tile = b_tile + b_floats;
  const auto n = static_cast<std::size_t>(s.n);
  for (int i0 = 0; i0 < s.m; i0 += tm) {
    const int rows = std::min(tm, s.m - i0);
    for (int j0 = 0; j0 < s.n; j0 += tn) {
      const int cols = std::min(tn, s.n - j0);
      float* acc = acc_tile;
      std::size_t ldc = static_cast<std::size_t>(cols);
      if (s.dst_fp32) {
        acc = static_cast<float*>(args.dst) + static_cast<std::size_t>(i0) * n + j0;
        ldc = n;
      }
      start_tile(acc, ldc, s, args, i0, rows, j0, cols);
      for (int k0 = 0; k0 < s.k; k0 += tk) {
        const int depth = std::min(tk, s.k - k0);
        // Each tile keeps its stored orientation; sgemm's transpose flags undo it.
        if (s.a_transposed) {
          widen(a_tile, args.a, static_cast<std::size_t>(s.m), k0, depth, i0, rows);
        } else {
          widen(a_tile, args.a, static_cast<std::size_t>(s.k), i0, rows, k0, depth);
        }
        if (s.b_transposed) {
          widen(b_tile, args.b, static_cast<std::size_t>(s.k), j0, cols, k0, depth);
        } else {
          widen(b_tile, args.b, n, k0, depth, j0, cols);
        }
        gemm<float>(s.a_transposed, s.b_transposed, rows, cols, depth, 1.0f, a_tile,
                    s.a_transposed ? rows : depth, b_tile, s.b_transposed ? depth : cols, 1.0f, acc,
                    static_cast<int>(ldc));
      }
      if (!s.dst_fp32) store_tile(static_cast<bf16*>(args.dst), n, acc, i0, rows, j0, cols);
    }
  }
}

}  // namespace plait::kernels
