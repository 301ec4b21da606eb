#include "plait/kernels/gelu.h"

#include <cstdint>

#include "plait/kernels/accumulator.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;

}  // namespace

// T is the storage type, F = Acc<T> the arithmetic (fp32 for bf16: the input widened exactly,
// the result rounded once).

template <typename T>
void gelu_forward(T* out, const T* inp, std::size_t n) {
  using F = Acc<T>;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const F x = to_float(inp[i]);
    const F u = F(kSqrt2OverPi) * (x + F(kCubic) * x * x * x);
    out[i] = from_float<T>(x / (F(1) + exp_fast(F(-2) * u)));
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n) {
  using F = Acc<T>;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const F x = to_float(inp[i]);
    const F u = F(kSqrt2OverPi) * (x + F(kCubic) * x * x * x);
    const F s = F(1) / (F(1) + exp_fast(F(-2) * u));
    const F du = F(kSqrt2OverPi) * (F(1) + F(3 * kCubic) * x * x);
    dinp[i] = from_float<T>(to_float(dout[i]) * (s + F(2) * x * s * (F(1) - s) * du));
  }
}

template void gelu_forward<float>(float*, const float*, std::size_t);
template void gelu_forward<double>(double*, const double*, std::size_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t);
template void gelu_backward<double>(double*, const double*, const double*, std::size_t);
template void gelu_forward<bf16>(bf16*, const bf16*, std::size_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, std::size_t);

}  // namespace plait::kernels
