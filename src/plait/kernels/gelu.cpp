#include "plait/kernels/gelu.h"

#include <cstdint>

#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const T x = inp[i];
    const T u = T(kSqrt2OverPi) * (x + T(kCubic) * x * x * x);
    out[i] = x / (T(1) + exp_fast(T(-2) * u));
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const T x = inp[i];
    const T u = T(kSqrt2OverPi) * (x + T(kCubic) * x * x * x);
    const T s = T(1) / (T(1) + exp_fast(T(-2) * u));
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * x * x);
    dinp[i] = dout[i] * (s + T(2) * x * s * (T(1) - s) * du);
  }
}

template void gelu_forward<float>(float*, const float*, std::size_t);
template void gelu_forward<double>(double*, const double*, std::size_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t);
template void gelu_backward<double>(double*, const double*, const double*, std::size_t);

}  // namespace plait::kernels
