#include "plait/kernels/cuda/rotary.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// One block per position t: its threads first compute cos and sin of the position's d/2 angles
// into shared memory (double, as the CPU kernel), then rotate every (batch row, head, pair) of
// that position. sign = +1 forward, -1 for R^T.
template <typename T>
__global__ void rotate_kernel(T* x, int batch, int s, int heads, int head_dim, int row_stride,
                              int pos0, double theta, float sign) {
  PLAIT_DYNAMIC_SHARED(float, table);  // cos in [0, half), sin in [half, 2 half)
  const int half = head_dim / 2;
  const int t = blockIdx.x;
  const double p = static_cast<double>(pos0) + t;
  for (int k = threadIdx.x; k < half; k += blockDim.x) {
    const double angle = p * pow(theta, -2.0 * k / head_dim);  // theta^(-2i/d) (HF inv_freq)
    table[k] = static_cast<float>(cos(angle));
    table[half + k] = sign * static_cast<float>(sin(angle));
  }
  __syncthreads();
  const int pairs = batch * heads * half;
  for (int idx = threadIdx.x; idx < pairs; idx += blockDim.x) {
    const int k = idx % half;
    const int h = (idx / half) % heads;
    const int b = idx / (half * heads);
    T* lo = x + (static_cast<std::size_t>(b) * s + t) * row_stride +
            static_cast<std::size_t>(h) * head_dim + k;
    T* hi = lo + half;
    const float a = to_float(*lo), c = to_float(*hi);
    const float cs = table[k], sn = table[half + k];
    *lo = from_float<T>(a * cs - c * sn);
    *hi = from_float<T>(c * cs + a * sn);
  }
}

void check_arguments(int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                     double theta) {
  const bool ok = head_dim > 0 && head_dim % 2 == 0 && batch >= 0 && s >= 0 && heads > 0 &&
                  std::int64_t{heads} * head_dim <= row_stride && pos0 >= 0 && theta > 0;
  if (!ok) {
    throw Error(
        "rotary (CUDA): need an even head_dim > 0, batch and s >= 0, 0 < heads * "
        "head_dim <= row_stride, pos0 >= 0 and theta > 0; got batch=" +
        std::to_string(batch) + " s=" + std::to_string(s) + " heads=" + std::to_string(heads) +
        " head_dim=" + std::to_string(head_dim) + " row_stride=" + std::to_string(row_stride) +
        " pos0=" + std::to_string(pos0) + " theta=" + std::to_string(theta));
  }
}

template <typename T>
void rotate(const char* name, T* x, int batch, int s, int heads, int head_dim, int row_stride,
            int pos0, double theta, float sign, const Context& ctx) {
  check_arguments(batch, s, heads, head_dim, row_stride, pos0, theta);
  if (batch == 0) return;
  launch(name, rotate_kernel<T>, dim3(static_cast<unsigned>(s)), dim3(kThreads),
         sizeof(float) * static_cast<std::size_t>(head_dim), ctx, x, batch, s, heads, head_dim,
         row_stride, pos0, theta, sign);
}

}  // namespace

template <typename T>
void rotary_forward(T* x, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                    double theta, const Context& ctx) {
  rotate("rotary_forward", x, batch, s, heads, head_dim, row_stride, pos0, theta, 1.0f, ctx);
}

template <typename T>
void rotary_backward(T* dx, int batch, int s, int heads, int head_dim, int row_stride, int pos0,
                     double theta, const Context& ctx) {
  rotate("rotary_backward", dx, batch, s, heads, head_dim, row_stride, pos0, theta, -1.0f, ctx);
}

template void rotary_forward<float>(float*, int, int, int, int, int, int, double, const Context&);
template void rotary_forward<bf16>(bf16*, int, int, int, int, int, int, double, const Context&);
template void rotary_backward<float>(float*, int, int, int, int, int, int, double, const Context&);
template void rotary_backward<bf16>(bf16*, int, int, int, int, int, int, double, const Context&);

}  // namespace plait::kernels::cuda
