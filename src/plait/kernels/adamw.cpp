#include "plait/kernels/adamw.h"

#include <cmath>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const AdamWHyper& h) {
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), h.step));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), h.step));
  const float inv_bc1 = 1.0f / bc1;
  const float inv_bc2 = 1.0f / bc2;
  const float decay = 1.0f - h.lr * h.weight_decay;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = grads[i] * h.grad_scale;
    const float mi = h.beta1 * m[i] + (1.0f - h.beta1) * g;
    const float vi = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] = params[i] * decay - h.lr * (mi * inv_bc1) / (std::sqrt(vi * inv_bc2) + h.eps);
  }
}

}  // namespace plait::kernels
