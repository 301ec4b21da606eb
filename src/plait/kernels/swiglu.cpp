#include "plait/kernels/swiglu.h"

#include <cstddef>
#include <cstdint>

#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

// sigmoid through exp_fast (Cephes' scheme for fp32, relative error <= 2.5e-7; libm for fp64).
// For g below about -87 the clamped exponential leaves sigmoid ~1e-38 instead of 0, which is
// harmless: silu(g) = g * sigmoid(g) is then ~1e-36.

template <typename T>
void swiglu_forward(T* out, const T* gate_up, int n, int f) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * f))
  for (int i = 0; i < n; ++i) {
    const T* g = gate_up + static_cast<std::size_t>(i) * 2 * f;
    const T* u = g + f;
    T* o = out + static_cast<std::size_t>(i) * f;
#pragma omp simd
    for (int j = 0; j < f; ++j) o[j] = g[j] / (T(1) + exp_fast(-g[j])) * u[j];
  }
}

template <typename T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int n, int f) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * f))
  for (int i = 0; i < n; ++i) {
    const T* g = gate_up + static_cast<std::size_t>(i) * 2 * f;
    const T* u = g + f;
    const T* dy = dout + static_cast<std::size_t>(i) * f;
    T* dg = dgate_up + static_cast<std::size_t>(i) * 2 * f;
    T* du = dg + f;
#pragma omp simd
    for (int j = 0; j < f; ++j) {
      const T s = T(1) / (T(1) + exp_fast(-g[j]));
      const T silu = g[j] * s;
      dg[j] = dy[j] * u[j] * s * (T(1) + g[j] * (T(1) - s));
      du[j] = dy[j] * silu;
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int, int);
template void swiglu_forward<double>(double*, const double*, int, int);
template void swiglu_backward<float>(float*, const float*, const float*, int, int);
template void swiglu_backward<double>(double*, const double*, const double*, int, int);

}  // namespace plait::kernels
