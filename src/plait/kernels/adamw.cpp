#include "plait/kernels/adamw.h"

#include <cmath>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {
namespace {

// One loop per form, so that the fp32-only one has no per-element test of params_bf16 and both
// vectorise; the arithmetic is the same expressions in both.
template <bool kWritesCopy>
void update(float* params, bf16* params_bf16, const float* grads, float* m, float* v,
            std::size_t n, const AdamWHyper& h) {
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), h.step));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), h.step));
  const float inv_bc1 = 1.0f / bc1;
  const float inv_bc2 = 1.0f / bc2;
  const float decay = 1.0f - h.lr * h.weight_decay;
  // Locals, not loads through h inside the loop: with a bf16 store in the loop GCC no longer
  // hoists them and gives up vectorising.
  const float lr = h.lr, beta1 = h.beta1, beta2 = h.beta2, eps = h.eps, grad_scale = h.grad_scale;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = grads[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float p = params[i] * decay - lr * (mi * inv_bc1) / (std::sqrt(vi * inv_bc2) + eps);
    params[i] = p;
    if constexpr (kWritesCopy) params_bf16[i] = bf16(p);
  }
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const AdamWHyper& h) {
  update<false>(params, nullptr, grads, m, v, n, h);
}

void adamw_update(float* params, bf16* params_bf16, const float* grads, float* m, float* v,
                  std::size_t n, const AdamWHyper& h) {
  if (params_bf16) {
    update<true>(params, params_bf16, grads, m, v, n, h);
  } else {
    update<false>(params, nullptr, grads, m, v, n, h);
  }
}

}  // namespace plait::kernels
