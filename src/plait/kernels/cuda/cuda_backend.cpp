#include "plait/kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <new>
#include <type_traits>

#include "plait/core/error.h"
#include "plait/kernels/cuda/adamw.h"
#include "plait/kernels/cuda/attention.h"
#include "plait/kernels/cuda/cross_entropy.h"
#include "plait/kernels/cuda/cuda_check.h"
#include "plait/kernels/cuda/embedding.h"
#include "plait/kernels/cuda/gelu.h"
#include "plait/kernels/cuda/grad_norm.h"
#include "plait/kernels/cuda/layernorm.h"
#include "plait/kernels/cuda/matmul.h"
#include "plait/kernels/cuda/normal_init.h"
#include "plait/kernels/cuda/rmsnorm.h"
#include "plait/kernels/cuda/rotary.h"
#include "plait/kernels/cuda/swiglu.h"
#include "plait/kernels/cuda/vector_ops.h"

namespace plait::kernels::cuda {
namespace {

cudaMemcpyKind memcpy_kind(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice: return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost: return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

// The engine's bf16 (core/bf16.h) and CUDA's __nv_bfloat16 are both the upper 16 bits of an
// fp32 value, stored alone: a buffer of one is a buffer of the other.
static_assert(sizeof(plait::bf16) == sizeof(bf16) && alignof(plait::bf16) == alignof(bf16));

// The kernels' storage type for the engine's: float stays float, bf16 becomes cuda::bf16.
template <typename T>
using Device = std::conditional_t<std::is_same_v<std::remove_const_t<T>, plait::bf16>,
                                  std::conditional_t<std::is_const_v<T>, const bf16, bf16>, T>;

template <typename T>
Device<T>* device(T* p) {
  return reinterpret_cast<Device<T>*>(p);
}

// The engine's K/V blocks as the CUDA kernels' (the same fields; dkv is float* in both, the
// fp32 accumulator of either precision).
template <typename T>
std::vector<KVBlock<Device<T>>> device_blocks(std::span<const kernels::KVBlock<T>> blocks) {
  std::vector<KVBlock<Device<T>>> out;
  out.reserve(blocks.size());
  for (const auto& b : blocks) out.push_back(KVBlock<Device<T>>{device(b.kv), b.dkv, b.length});
  return out;
}

}  // namespace

CudaBackend::CudaBackend() = default;

CudaBackend::~CudaBackend() {
  // Nothing may still read or write the staging when it is freed.
  cudaStreamSynchronize(ctx_.stream());
  for (auto& [sequence, event] : pending_) cudaEventDestroy(event);
  for (Staging* s : {&targets_, &sum_workspace_, &sum_result_, &mask_}) {
    if (s->data != nullptr) cudaFree(s->data);
  }
}

void* CudaBackend::allocate(std::size_t bytes) {
  void* block = nullptr;
  // cudaMalloc's blocks are 256-byte aligned, beyond MemorySpace's 64.
  if (cudaMalloc(&block, bytes > 0 ? bytes : 1) != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky: clear it so later checks do not see it
    throw std::bad_alloc();
  }
  return block;
}

void CudaBackend::deallocate(void* block, std::size_t) {
  check_cuda(cudaFree(block), "CudaBackend: cudaFree");
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(kind), ctx_.stream()),
             "CudaBackend: cudaMemcpyAsync");
  // The interface lets the host read a device-to-host copy's destination once the call returns.
  if (kind == CopyKind::kDeviceToHost) ctx_.synchronize();
}

void CudaBackend::zero(void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemsetAsync(dst, 0, bytes, ctx_.stream()), "CudaBackend: cudaMemsetAsync");
}

void CudaBackend::fill(float* dst, std::size_t n, float value) {
  cuda::fill(dst, n, value, ctx_);
}

Event CudaBackend::record() {
  cudaEvent_t event = nullptr;
  // No timing: only ordering is asked of it, and timing events cost more to record.
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "CudaBackend: event");
  check_cuda(cudaEventRecord(event, ctx_.stream()), "CudaBackend: cudaEventRecord");
  pending_.emplace_back(++recorded_, event);
  return Event{recorded_};
}

bool CudaBackend::ready(Event event) const {
  if (event.sequence <= completed_) return true;
  // Events on one stream complete in order: retire those that have.
  while (!pending_.empty()) {
    const cudaError_t state = cudaEventQuery(pending_.front().second);
    if (state == cudaErrorNotReady) break;
    check_cuda(state, "CudaBackend: cudaEventQuery");
    completed_ = pending_.front().first;
    cudaEventDestroy(pending_.front().second);
    pending_.pop_front();
  }
  return event.sequence <= completed_;
}

void CudaBackend::wait(Event event) {
  while (!pending_.empty() && pending_.front().first <= event.sequence) {
    check_cuda(cudaEventSynchronize(pending_.front().second), "CudaBackend: cudaEventSynchronize");
    completed_ = pending_.front().first;
    cudaEventDestroy(pending_.front().second);
    pending_.pop_front();
  }
}

void CudaBackend::synchronize() {
  ctx_.synchronize();
  for (auto& [sequence, event] : pending_) cudaEventDestroy(event);
  pending_.clear();
  completed_ = recorded_;
}

void* CudaBackend::staging(Staging& s, std::size_t bytes) {
  if (s.bytes < bytes) {
    if (s.data != nullptr) {
      // An earlier call on the stream may still use the old block.
      ctx_.synchronize();
      check_cuda(cudaFree(s.data), "CudaBackend: cudaFree (staging)");
      s.data = nullptr;
      s.bytes = 0;
    }
    check_cuda(cudaMalloc(&s.data, bytes), "CudaBackend: cudaMalloc (staging)");
    s.bytes = bytes;
  }
  return s.data;
}

std::size_t CudaBackend::attention_backward_workspace(int batch, int s, int, int heads,
                                                      int) const {
  return cuda::attention_backward_workspace(batch, s, heads);
}

void CudaBackend::matmul_forward(float* out, const float* inp, const float* weight,
                                 const float* bias, const float* residual, int n, int c, int oc) {
  cuda::matmul_forward<float>(out, inp, weight, bias, residual, n, c, oc, ctx_);
}

void CudaBackend::matmul_backward_input(float* dinp, const float* dout, const float* weight,
                                        int n, int c, int oc, bool accumulate) {
  cuda::matmul_backward_input<float>(dinp, dout, weight, n, c, oc, accumulate, ctx_);
}

void CudaBackend::matmul_backward_weight(float* dweight, float* dbias, const float* dout,
                                         const float* inp, int n, int c, int oc) {
  cuda::matmul_backward_weight<float>(dweight, dbias, dout, inp, n, c, oc, ctx_);
}

void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int n, int c,
                                    double eps) {
  cuda::layernorm_forward<float>(out, mean, rstd, inp, weight, bias, n, c, eps, ctx_);
}

void CudaBackend::layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                           const float* inp, const float* weight,
                                           const float* mean, const float* rstd, int n, int c) {
  cuda::layernorm_backward_input<float>(dinp, dresidual, dout, inp, weight, mean, rstd, n, c,
                                        ctx_);
}

void CudaBackend::layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                            const float* inp, const float* mean,
                                            const float* rstd, int n, int c) {
  cuda::layernorm_backward_weight<float>(dweight, dbias, dout, inp, mean, rstd, n, c, ctx_);
}

void CudaBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                  int n, int c, double eps) {
  cuda::rmsnorm_forward<float>(out, rstd, inp, weight, n, c, eps, ctx_);
}

void CudaBackend::rmsnorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                         const float* inp, const float* weight, const float* rstd,
                                         int n, int c) {
  cuda::rmsnorm_backward_input<float>(dinp, dresidual, dout, inp, weight, rstd, n, c, ctx_);
}

void CudaBackend::rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                          const float* rstd, int n, int c) {
  cuda::rmsnorm_backward_weight<float>(dweight, dout, inp, rstd, n, c, ctx_);
}

void CudaBackend::gelu_forward(float* out, const float* inp, std::size_t n) {
  cuda::gelu_forward<float>(out, inp, n, ctx_);
}

void CudaBackend::gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  cuda::gelu_backward<float>(dinp, inp, dout, n, ctx_);
}

void CudaBackend::swiglu_forward(float* out, const float* gate_up, int n, int f) {
  cuda::swiglu_forward<float>(out, gate_up, n, f, ctx_);
}

void CudaBackend::swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int n,
                                  int f) {
  cuda::swiglu_backward<float>(dgate_up, dout, gate_up, n, f, ctx_);
}

void CudaBackend::rotary_forward(float* x, int batch, int s, int heads, int head_dim,
                                 int row_stride, int pos0, double theta) {
  cuda::rotary_forward<float>(x, batch, s, heads, head_dim, row_stride, pos0, theta, ctx_);
}

void CudaBackend::rotary_backward(float* dx, int batch, int s, int heads, int head_dim,
                                  int row_stride, int pos0, double theta) {
  cuda::rotary_backward<float>(dx, batch, s, heads, head_dim, row_stride, pos0, theta, ctx_);
}

void CudaBackend::attention_forward(float* out, float* lse, const float* q,
                                    std::span<const kernels::KVBlock<float>> blocks, int batch,
                                    int s, int c, int heads, int kv_heads, DocumentMask mask) {
  const auto kv = device_blocks(blocks);
  cuda::attention_forward<float>(out, lse, q, std::span<const KVBlock<float>>(kv), batch, s,
                                 c, heads, kv_heads, ctx_, device_mask(mask, batch));
}

void CudaBackend::attention_backward(float* dq, std::span<const kernels::KVBlock<float>> blocks,
                                     const float* dout, const float* q, const float* out,
                                     const float* lse, int batch, int s, int c, int heads,
                                     int kv_heads, float* workspace, DocumentMask mask) {
  const auto kv = device_blocks(blocks);
  cuda::attention_backward<float>(dq, std::span<const KVBlock<float>>(kv), dout, q, out, lse,
                                  batch, s, c, heads, kv_heads, workspace, ctx_,
                                  device_mask(mask, batch));
}

void CudaBackend::embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                    const float* wpe, int batch, int s, int c, int pos0,
                                    int vocab) {
  cuda::embedding_forward<float>(out, tokens, wte, wpe, batch, s, c, pos0, vocab, ctx_);
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                     const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                     int vocab) {
  cuda::embedding_backward<float>(dwte, dwpe, dout, tokens, batch, s, c, pos0, vocab, ctx_);
}

DeviceDocumentMask CudaBackend::device_mask(const DocumentMask& mask, int batch) {
  if (mask.start == nullptr) return {};
  const std::size_t n = static_cast<std::size_t>(batch) * mask.stride;
  if (mask_stride_ != mask.stride || mask_host_.size() != n ||
      !std::equal(mask_host_.begin(), mask_host_.end(), mask.start)) {
    auto* dst = static_cast<std::int32_t*>(staging(mask_, n * sizeof(std::int32_t)));
    copy(dst, mask.start, n * sizeof(std::int32_t), CopyKind::kHostToDevice);
    mask_host_.assign(mask.start, mask.start + n);
    mask_stride_ = mask.stride;
  }
  return {static_cast<const std::int32_t*>(mask_.data), mask.stride};
}

template <typename T>
double CudaBackend::cross_entropy(T* logits, float* losses, const std::int32_t* targets, int n,
                                  int v, double loss_scale) {
  const std::size_t rows = static_cast<std::size_t>(n);
  auto* device_targets =
      static_cast<std::int32_t*>(staging(targets_, rows * sizeof(std::int32_t)));
  copy(device_targets, targets, rows * sizeof(std::int32_t), CopyKind::kHostToDevice);
  cuda::cross_entropy_forward_backward<T>(logits, losses, device_targets, n, v, loss_scale, ctx_);
  host_losses_.resize(rows);
  copy(host_losses_.data(), losses, rows * sizeof(float), CopyKind::kDeviceToHost);
  // The CPU kernel's total: the rows' losses added in double, times the scale (the CPU adds them
  // before their rounding to fp32, so the two differ by about fp32's 6e-8 relative).
  double total = 0;
  for (float loss : host_losses_) total += static_cast<double>(loss);
  return total * loss_scale;
}

double CudaBackend::cross_entropy_forward_backward(float* logits, float* losses,
                                                   const std::int32_t* targets, int n, int v,
                                                   double loss_scale) {
  return cross_entropy(logits, losses, targets, n, v, loss_scale);
}

void CudaBackend::adamw_update(float* params, const float* grads, float* m, float* v,
                               std::size_t n, const AdamWHyper& hyper) {
  // fp32 mode: no bf16 copy of the weights.
  cuda::adamw_update(params, nullptr, grads, m, v, n, hyper, ctx_);
}

double CudaBackend::sum_of_squares(const float* x, std::size_t n) {
  auto* workspace = static_cast<double*>(
      staging(sum_workspace_, cuda::sum_of_squares_workspace(n) * sizeof(double)));
  auto* result = static_cast<double*>(staging(sum_result_, sizeof(double)));
  cuda::sum_of_squares(result, x, n, workspace, ctx_);
  double host = 0;
  copy(&host, result, sizeof(double), CopyKind::kDeviceToHost);
  return host;
}

void CudaBackend::accumulate(float* dst, const float* src, std::size_t n) {
  cuda::accumulate(dst, src, n, ctx_);
}

void CudaBackend::normal_init(float* values, std::size_t n, double std, std::uint64_t key) {
  cuda::normal_init(values, n, std, key, ctx_);
}

// ---- bf16 mixed precision. `bf16` below is the engine's (CudaBackend::bf16); device() hands the
// same memory to the launchers as cuda::bf16.

void CudaBackend::convert(bf16* dst, const float* src, std::size_t n) {
  cuda::convert(device(dst), src, n, ctx_);
}

void CudaBackend::convert(float* dst, const bf16* src, std::size_t n) {
  cuda::convert(dst, device(src), n, ctx_);
}

void CudaBackend::matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias,
                                 const bf16* residual, int n, int c, int oc) {
  cuda::matmul_forward<cuda::bf16>(device(out), device(inp), device(weight), device(bias),
                                   device(residual), n, c, oc, ctx_);
}

void CudaBackend::matmul_backward_input(bf16* dinp, const bf16* dout, const bf16* weight, int n,
                                        int c, int oc, bool accumulate) {
  cuda::matmul_backward_input<cuda::bf16>(device(dinp), device(dout), device(weight), n, c, oc,
                                          accumulate, ctx_);
}

void CudaBackend::matmul_backward_weight(float* dweight, float* dbias, const bf16* dout,
                                         const bf16* inp, int n, int c, int oc) {
  cuda::matmul_backward_weight<cuda::bf16>(dweight, dbias, device(dout), device(inp), n, c, oc,
                                           ctx_);
}

void CudaBackend::layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                                    const bf16* weight, const bf16* bias, int n, int c,
                                    double eps) {
  cuda::layernorm_forward<cuda::bf16>(device(out), mean, rstd, device(inp), device(weight),
                                      device(bias), n, c, eps, ctx_);
}

void CudaBackend::layernorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                           const bf16* inp, const bf16* weight, const float* mean,
                                           const float* rstd, int n, int c) {
  cuda::layernorm_backward_input<cuda::bf16>(device(dinp), device(dresidual), device(dout),
                                             device(inp), device(weight), mean, rstd, n, c, ctx_);
}

void CudaBackend::layernorm_backward_weight(float* dweight, float* dbias, const bf16* dout,
                                            const bf16* inp, const float* mean, const float* rstd,
                                            int n, int c) {
  cuda::layernorm_backward_weight<cuda::bf16>(dweight, dbias, device(dout), device(inp), mean,
                                              rstd, n, c, ctx_);
}

void CudaBackend::rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight,
                                  int n, int c, double eps) {
  cuda::rmsnorm_forward<cuda::bf16>(device(out), rstd, device(inp), device(weight), n, c, eps,
                                    ctx_);
}

void CudaBackend::rmsnorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                         const bf16* inp, const bf16* weight, const float* rstd,
                                         int n, int c) {
  cuda::rmsnorm_backward_input<cuda::bf16>(device(dinp), device(dresidual), device(dout),
                                           device(inp), device(weight), rstd, n, c, ctx_);
}

void CudaBackend::rmsnorm_backward_weight(float* dweight, const bf16* dout, const bf16* inp,
                                          const float* rstd, int n, int c) {
  cuda::rmsnorm_backward_weight<cuda::bf16>(dweight, device(dout), device(inp), rstd, n, c, ctx_);
}

void CudaBackend::gelu_forward(bf16* out, const bf16* inp, std::size_t n) {
  cuda::gelu_forward<cuda::bf16>(device(out), device(inp), n, ctx_);
}

void CudaBackend::gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::size_t n) {
  cuda::gelu_backward<cuda::bf16>(device(dinp), device(inp), device(dout), n, ctx_);
}

void CudaBackend::swiglu_forward(bf16* out, const bf16* gate_up, int n, int f) {
  cuda::swiglu_forward<cuda::bf16>(device(out), device(gate_up), n, f, ctx_);
}

void CudaBackend::swiglu_backward(bf16* dgate_up, const bf16* dout, const bf16* gate_up, int n,
                                  int f) {
  cuda::swiglu_backward<cuda::bf16>(device(dgate_up), device(dout), device(gate_up), n, f, ctx_);
}

void CudaBackend::rotary_forward(bf16* x, int batch, int s, int heads, int head_dim,
                                 int row_stride, int pos0, double theta) {
  cuda::rotary_forward<cuda::bf16>(device(x), batch, s, heads, head_dim, row_stride, pos0, theta,
                                   ctx_);
}

void CudaBackend::rotary_backward(bf16* dx, int batch, int s, int heads, int head_dim,
                                  int row_stride, int pos0, double theta) {
  cuda::rotary_backward<cuda::bf16>(device(dx), batch, s, heads, head_dim, row_stride, pos0, theta,
                                    ctx_);
}

void CudaBackend::attention_forward(bf16* out, float* lse, const bf16* q,
                                    std::span<const kernels::KVBlock<bf16>> blocks, int batch,
                                    int s, int c, int heads, int kv_heads, DocumentMask mask) {
  const auto kv = device_blocks(blocks);
  cuda::attention_forward<cuda::bf16>(device(out), lse, device(q),
                                      std::span<const KVBlock<cuda::bf16>>(kv), batch, s, c, heads,
                                      kv_heads, ctx_, device_mask(mask, batch));
}

void CudaBackend::attention_backward(bf16* dq, std::span<const kernels::KVBlock<bf16>> blocks,
                                     const bf16* dout, const bf16* q, const bf16* out,
                                     const float* lse, int batch, int s, int c, int heads,
                                     int kv_heads, float* workspace, DocumentMask mask) {
  const auto kv = device_blocks(blocks);
  cuda::attention_backward<cuda::bf16>(device(dq), std::span<const KVBlock<cuda::bf16>>(kv),
                                       device(dout), device(q), device(out), lse, batch, s, c,
                                       heads, kv_heads, workspace, ctx_, device_mask(mask, batch));
}

void CudaBackend::embedding_forward(bf16* out, const std::int32_t* tokens, const bf16* wte,
                                    const bf16* wpe, int batch, int s, int c, int pos0,
                                    int vocab) {
  cuda::embedding_forward<cuda::bf16>(device(out), tokens, device(wte), device(wpe), batch, s, c,
                                      pos0, vocab, ctx_);
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, const bf16* dout,
                                     const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                     int vocab) {
  cuda::embedding_backward<cuda::bf16>(dwte, dwpe, device(dout), tokens, batch, s, c, pos0, vocab,
                                       ctx_);
}

double CudaBackend::cross_entropy_forward_backward(bf16* logits, float* losses,
                                                   const std::int32_t* targets, int n, int v,
                                                   double loss_scale) {
  return cross_entropy(device(logits), losses, targets, n, v, loss_scale);
}

void CudaBackend::adamw_update(float* params, bf16* copy, const float* grads, float* m, float* v,
                               std::size_t n, const AdamWHyper& hyper) {
  cuda::adamw_update(params, device(copy), grads, m, v, n, hyper, ctx_);
}

}  // namespace plait::kernels::cuda
