#include "plait/kernels/cuda/cross_entropy.h"

#include <cstddef>

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: the maximum, then the normaliser (fp32 terms per thread, added across
// threads in double, as the CPU kernel adds its fp32 chunk sums in double), then the gradient,
// with the exponential computed again rather than stored between passes (in bf16 a stored
// exponential would be rounded before the scaling).
template <typename T>
__global__ void forward_backward_kernel(T* logits, float* losses, const std::int32_t* targets,
                                        int v, double loss_scale) {
  T* row = logits + static_cast<std::size_t>(blockIdx.x) * v;
  const std::int32_t target = targets[blockIdx.x];
  if (target == kNoTarget) {
    // Nothing to predict (a packed sequence's padding): loss 0, gradient 0, as the CPU kernel.
    for (int j = threadIdx.x; j < v; j += blockDim.x) row[j] = from_float<T>(0.0f);
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.0f;
    return;
  }
  const bool valid = target >= 0 && target < v;
  // Every thread reads the target's logit before block_max's barriers; only after them does any
  // thread overwrite the row.
  const float target_logit = valid ? to_float(row[target]) : NAN;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, to_float(row[j]));
  m = block_max(m);
  float part = 0.0f;
  for (int j = threadIdx.x; j < v; j += blockDim.x) part += expf(to_float(row[j]) - m);
  const double sum = block_sum(static_cast<double>(part));
  const float g = static_cast<float>(loss_scale / sum);
  const float scale = static_cast<float>(loss_scale);
  for (int j = threadIdx.x; j < v; j += blockDim.x) {
    float d = expf(to_float(row[j]) - m) * g;
    if (j == target) d -= scale;
    row[j] = from_float<T>(valid ? d : NAN);
  }
  if (threadIdx.x == 0) {
    losses[blockIdx.x] =
        static_cast<float>(log(sum) + static_cast<double>(m) - static_cast<double>(target_logit));
  }
}

}  // namespace

template <typename T>
void cross_entropy_forward_backward(T* logits, float* losses, const std::int32_t* targets, int n,
                                    int v, double loss_scale, const Context& ctx) {
  launch("cross_entropy_forward_backward", forward_backward_kernel<T>,
         dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, ctx, logits, losses, targets, v,
         loss_scale);
}

template void cross_entropy_forward_backward<float>(float*, float*, const std::int32_t*, int, int,
                                                    double, const Context&);
template void cross_entropy_forward_backward<bf16>(bf16*, float*, const std::int32_t*, int, int,
                                                   double, const Context&);

}  // namespace plait::kernels::cuda
