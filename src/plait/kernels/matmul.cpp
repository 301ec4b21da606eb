#include "plait/kernels/matmul.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "plait/kernels/blas.h"
#include "plait/kernels/column_sums.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, const T* residual, int n,
                    int c, int oc) {
  T beta = 0;
  if (bias != nullptr || residual != nullptr) {
    // Pre-fill out with bias (+ residual) and let the GEMM accumulate (beta = 1): one pass over
    // out instead of OpenBLAS's beta = 0 clearing pass plus a separate bias pass.
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * oc))
    for (int i = 0; i < n; ++i) {
      T* row = out + static_cast<std::size_t>(i) * oc;
      const T* res = residual ? residual + static_cast<std::size_t>(i) * oc : nullptr;
      if (bias && res) {
        for (int o = 0; o < oc; ++o) row[o] = bias[o] + res[o];
      } else if (bias) {
        for (int o = 0; o < oc; ++o) row[o] = bias[o];
      } else {
        for (int o = 0; o < oc; ++o) row[o] = res[o];
      }
    }
    beta = 1;
  }
  gemm<T>(false, true, n, oc, c, T(1), inp, c, weight, c, beta, out, oc);
}

template <typename T>
void matmul_backward_input(T* dinp, const T* dout, const T* weight, int n, int c, int oc,
                           bool accumulate) {
  gemm<T>(false, false, n, c, oc, T(1), dout, oc, weight, c, accumulate ? T(1) : T(0), dinp, c);
}

template <typename T>
void matmul_backward_weight(Acc<T>* dweight, Acc<T>* dbias, const T* dout, const T* inp, int n, int c,
                            int oc) {
  gemm<T>(true, false, oc, c, n, T(1), dout, oc, inp, c, T(1), dweight, c);
  if (dbias != nullptr) add_column_sums(dbias, dout, n, oc);
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, const float*,
                                    int, int, int);
template void matmul_forward<double>(double*, const double*, const double*, const double*,
                                     const double*, int, int, int);
template void matmul_backward_input<float>(float*, const float*, const float*, int, int, int, bool);
template void matmul_backward_input<double>(double*, const double*, const double*, int, int, int,
                                            bool);
template void matmul_backward_weight<float>(float*, float*, const float*, const float*, int, int,
                                            int);
template void matmul_backward_weight<double>(double*, double*, const double*, const double*, int,
                                             int, int);

}  // namespace plait::kernels
