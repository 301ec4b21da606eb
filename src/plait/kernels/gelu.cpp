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
#pragma omp parallel for simd schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const T x = inp[i];
    const T u = T(kSqrt2OverPi) * (x + T(kCubic) * x * x * x);
    out[i] = T(0.5) * x * (T(1) + tanh_fast(u));
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for simd schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const T x = inp[i];
    const T u = T(kSqrt2OverPi) * (x + T(kCubic) * x * x * x);
    const T t = tanh_fast(u);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * x * x);
    const T grad = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
    dinp[i] = dout[i] * grad;
  }
}

template void gelu_forward<float>(float*, const float*, std::size_t);
template void gelu_forward<double>(double*, const double*, std::size_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t);
template void gelu_backward<double>(double*, const double*, const double*, std::size_t);

}  // namespace plait::kernels
