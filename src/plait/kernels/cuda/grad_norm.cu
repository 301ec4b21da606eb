#include "plait/kernels/cuda/grad_norm.h"

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Block b sums the squares of chunk b in double.
__global__ void chunk_kernel(double* partial, const float* x, long long n) {
  const long long begin = static_cast<long long>(blockIdx.x) * kSumOfSquaresChunk;
  const long long end = begin + static_cast<long long>(kSumOfSquaresChunk) < n
                            ? begin + static_cast<long long>(kSumOfSquaresChunk)
                            : n;
  double s = 0.0;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double xi = x[i];
    s += xi * xi;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block adds the chunks' sums.
__global__ void total_kernel(double* result, const double* partial, long long chunks) {
  double s = 0.0;
  for (long long i = threadIdx.x; i < chunks; i += blockDim.x) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *result = s;
}

__global__ void scale_kernel(float* x, long long n, float factor) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    x[i] *= factor;
  }
}

}  // namespace

void sum_of_squares(double* result, const float* x, std::size_t n, double* workspace,
                    const Context& ctx) {
  const auto count = static_cast<long long>(n);
  const auto chunks = static_cast<long long>(sum_of_squares_workspace(n));
  if (n == 0) {
    check_cuda(cudaMemsetAsync(result, 0, sizeof(double), ctx.stream()), "sum_of_squares");
    return;
  }
  launch("sum_of_squares: chunks", chunk_kernel, dim3(static_cast<unsigned>(chunks)),
         dim3(kThreads), 0, ctx, workspace, x, count);
  launch("sum_of_squares: total", total_kernel, dim3(1), dim3(kThreads), 0, ctx, result, workspace,
         chunks);
}

void scale_in_place(float* x, std::size_t n, float factor, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("scale_in_place", scale_kernel, elementwise_grid(count, kThreads), dim3(kThreads), 0, ctx,
         x, count, factor);
}

}  // namespace plait::kernels::cuda
