#pragma once
// The GEMM peaks a benchmark compares itself with, measured in the same run and with the same
// (OpenMP) threads: best-of-`repeats` GFLOP/s (2n^3 / time) of an n x n x n product after one
// untimed call (which, for bf16, also creates the primitive).
#include <functional>

#include "plait/kernels/onednn_context.h"

namespace plait::kernels {

// The best of `repeats` timed calls (seconds), after one untimed call (warm caches, primitives).
double best_seconds(int repeats, const std::function<void()>& call);

// fp32: OpenBLAS's sgemm (blas.h), the fp32 engine's matmuls.
double sgemm_peak_gflops(int n, int repeats);

// bf16: matmul_forward_bf16 (bf16_matmul.h; no bias) on the context's path — oneDNN's matmul, or
// the widened-sgemm fallback where oneDNN has no native bf16.
double bf16_gemm_peak_gflops(OneDnnContext& context, int n, int repeats);

}  // namespace plait::kernels
