#include "plait/kernels/cuda/adamw.h"

#include <cmath>

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// The step's constants, computed on the host exactly as the CPU kernel computes them.
struct AdamWConstants {
  float lr, beta1, beta2, eps, grad_scale;
  float inv_bc1, inv_bc2, decay;
};

__global__ void update_kernel(float* params, bf16* params_bf16, const float* grads, float* m,
                              float* v, long long n, AdamWConstants k) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float g = grads[i] * k.grad_scale;
    const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * g;
    const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float p = params[i] * k.decay - k.lr * (mi * k.inv_bc1) / (sqrtf(vi * k.inv_bc2) + k.eps);
    params[i] = p;
    if (params_bf16) params_bf16[i] = from_float<bf16>(p);
  }
}

}  // namespace

void adamw_update(float* params, bf16* params_bf16, const float* grads, float* m, float* v,
                  std::size_t n, const AdamWHyper& h, const Context& ctx) {
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), h.step));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), h.step));
  const AdamWConstants k{h.lr,         h.beta1,    h.beta2,    h.eps,
                         h.grad_scale, 1.0f / bc1, 1.0f / bc2, 1.0f - h.lr * h.weight_decay};
  const auto count = static_cast<long long>(n);
  launch("adamw_update", update_kernel, elementwise_grid(count, kThreads), dim3(kThreads), 0, ctx,
         params, params_bf16, grads, m, v, count, k);
}

}  // namespace plait::kernels::cuda
