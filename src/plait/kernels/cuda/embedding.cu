#include "plait/kernels/cuda/embedding.h"

#include <cstddef>

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// The backward's blocks: 8 warps of 32 columns each, times kVocabParts ranges of token ids.
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int kVocabParts = 64;

template <typename T>
__global__ void forward_kernel(T* out, const std::int32_t* tokens, const T* wte, const T* wpe,
                               int n, int s, int c, int pos0, int vocab) {
  const long long total = static_cast<long long>(n) * c;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = idx / c, j = idx % c;
    const std::int32_t tok = tokens[i];
    if (tok < 0 || tok >= vocab) {
      out[idx] = from_float<T>(NAN);
      continue;
    }
    float v = to_float(wte[static_cast<long long>(tok) * c + j]);
    if (wpe) v += to_float(wpe[(pos0 + i % s) * static_cast<long long>(c) + j]);
    out[idx] = from_float<T>(v);
  }
}

// Warp w of block (x, part) owns columns [(x * 8 + w) * 32, +32) of the dwte rows whose token id
// lies in the part's range; it walks all rows in order and adds those rows (a dwte row is
// touched by one warp only: no races, and the additions come in row order).
template <typename T>
__global__ void token_grad_kernel(float* dwte, const T* dout, const std::int32_t* tokens, int n,
                                  int c, int vocab) {
  const int j = (blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarp) * kWarp + threadIdx.x % kWarp;
  const int part_size = ceil_div(vocab, kVocabParts);
  const int lo = blockIdx.y * part_size;
  const int hi = lo + part_size < vocab ? lo + part_size : vocab;
  if (j >= c) return;
  for (int i = 0; i < n; ++i) {
    const std::int32_t tok = tokens[i];
    if (tok < lo || tok >= hi) continue;
    dwte[static_cast<std::size_t>(tok) * c + j] +=
        to_float(dout[static_cast<std::size_t>(i) * c + j]);
  }
}

// dwpe[pos0 + t, j] += dout[b, t, j] for b = 0, 1, ... in order (the CPU kernel's order).
template <typename T>
__global__ void position_grad_kernel(float* dwpe, const T* dout, int batch, int s, int c,
                                     int pos0) {
  const long long total = static_cast<long long>(s) * c;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = idx / c, j = idx % c;
    float* pe = dwpe + (pos0 + t) * c + j;
    float acc = *pe;
    for (int b = 0; b < batch; ++b) {
      acc += to_float(dout[(b * static_cast<long long>(s) + t) * c + j]);
    }
    *pe = acc;
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int batch,
                       int s, int c, int pos0, int vocab, const Context& ctx) {
  const int n = batch * s;
  launch("embedding_forward", forward_kernel<T>,
         elementwise_grid(static_cast<long long>(n) * c, kThreads), dim3(kThreads), 0, ctx, out,
         tokens, wte, wpe, n, s, c, pos0, vocab);
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const std::int32_t* tokens,
                        int batch, int s, int c, int pos0, int vocab, const Context& ctx) {
  const int n = batch * s;
  const dim3 grid(static_cast<unsigned>(ceil_div(c, kThreads)), kVocabParts);
  launch("embedding_backward: tokens", token_grad_kernel<T>, grid, dim3(kThreads), 0, ctx, dwte,
         dout, tokens, n, c, vocab);
  if (dwpe == nullptr) return;
  launch("embedding_backward: positions", position_grad_kernel<T>,
         elementwise_grid(static_cast<long long>(s) * c, kThreads), dim3(kThreads), 0, ctx, dwpe,
         dout, batch, s, c, pos0);
}

template void embedding_forward<float>(float*, const std::int32_t*, const float*, const float*, int,
                                       int, int, int, int, const Context&);
template void embedding_forward<bf16>(bf16*, const std::int32_t*, const bf16*, const bf16*, int,
                                      int, int, int, int, const Context&);
template void embedding_backward<float>(float*, float*, const float*, const std::int32_t*, int, int,
                                        int, int, int, const Context&);
template void embedding_backward<bf16>(float*, float*, const bf16*, const std::int32_t*, int, int,
                                       int, int, int, const Context&);

}  // namespace plait::kernels::cuda
