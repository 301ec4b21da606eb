#include "plait/kernels/swiglu.h"

#include <cstddef>
#include <cstdint>

#include "plait/kernels/accumulator.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

// sigmoid through exp_fast (Cephes' scheme for fp32, relative error <= 2.5e-7; libm for fp64).
// For g below about -87 the clamped exponential leaves sigmoid ~1e-38 instead of 0, which is
// harmless: silu(g) = g * sigmoid(g) is then ~1e-36.
//
// T is the storage type, F = Acc<T> the arithmetic (fp32 for bf16: inputs widened exactly, each
// output rounded once).

template <typename T>
void swiglu_forward(T* out, const T* gate_up, int n, int f) {
  using F = Acc<T>;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * f))
  for (int i = 0; i < n; ++i) {
    const T* g = gate_up + static_cast<std::size_t>(i) * 2 * f;
    const T* u = g + f;
    T* o = out + static_cast<std::size_t>(i) * f;
#pragma omp simd
    for (int j = 0; j < f; ++j) {
      const F gj = to_float(g[j]);
      o[j] = from_float<T>(gj / (F(1) + exp_fast(-gj)) * to_float(u[j]));
    }
  }
}

template <typename T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int n, int f) {
  using F = Acc<T>;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * f))
  for (int i = 0; i < n; ++i) {
    const T* g = gate_up + static_cast<std::size_t>(i) * 2 * f;
    const T* u = g + f;
    const T* dy = dout + static_cast<std::size_t>(i) * f;
    T* dg = dgate_up + static_cast<std::size_t>(i) * 2 * f;
    T* du = dg + f;
#pragma omp simd
    for (int j = 0; j < f; ++j) {
      const F gj = to_float(g[j]), dyj = to_float(dy[j]);
      const F s = F(1) / (F(1) + exp_fast(-gj));
      const F silu = gj * s;
      dg[j] = from_float<T>(dyj * to_float(u[j]) * s * (F(1) + gj * (F(1) - s)));
      du[j] = from_float<T>(dyj * silu);
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int, int);
template void swiglu_forward<double>(double*, const double*, int, int);
template void swiglu_backward<float>(float*, const float*, const float*, int, int);
template void swiglu_backward<double>(double*, const double*, const double*, int, int);
template void swiglu_forward<bf16>(bf16*, const bf16*, int, int);
template void swiglu_backward<bf16>(bf16*, const bf16*, const bf16*, int, int);

}  // namespace plait::kernels
