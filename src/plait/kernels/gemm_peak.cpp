#include "plait/kernels/gemm_peak.h"

#include <algorithm>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/kernels/bf16_matmul.h"
#include "plait/kernels/blas.h"

namespace plait::kernels {
namespace {

double gflops(int n, double seconds) { return 2.0 * n * n * static_cast<double>(n) / seconds / 1e9; }

void check_peak_args(int n, int repeats) {
  if (n < 1 || repeats < 1) throw Error("GEMM peak: n and repeats must be positive");
}

}  // namespace

double best_seconds(int repeats, const std::function<void()>& call) {
  call();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = monotonic_seconds();
    call();
    best = std::min(best, monotonic_seconds() - t0);
  }
  return best;
}

// Operands 0.5 and 0.25, whose products are exact: the cost does not depend on the values.
double sgemm_peak_gflops(int n, int repeats) {
  check_peak_args(n, repeats);
  const std::size_t count = static_cast<std::size_t>(n) * n;
  std::vector<float> a(count, 0.5f), b(count, 0.25f), c(count, 0.0f);
  return gflops(n, best_seconds(repeats, [&] {
    gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  }));
}

double bf16_gemm_peak_gflops(OneDnnContext& context, int n, int repeats) {
  check_peak_args(n, repeats);
  const std::size_t count = static_cast<std::size_t>(n) * n;
  std::vector<bf16> a(count, bf16(0.5f)), b(count, bf16(0.25f)), c(count);
  return gflops(n, best_seconds(repeats, [&] {
    matmul_forward_bf16(context, c.data(), a.data(), b.data(), nullptr, nullptr, n, n, n);
  }));
}

}  // namespace plait::kernels
