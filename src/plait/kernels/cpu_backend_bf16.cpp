// The CPU backend's bf16 operations: the bf16 instantiations of this directory's kernels (fp32
// arithmetic, one rounding per output; spec/precision_policy.h); the GEMMs through oneDNN's
// bf16 matmul (bf16_matmul.h), or widened operands and sgemm where the CPU has no native bf16.
#include "plait/core/host_memory.h"
#include "plait/kernels/adamw.h"
#include "plait/kernels/attention.h"
#include "plait/kernels/bf16_matmul.h"
#include "plait/kernels/cpu_backend.h"
#include "plait/kernels/cross_entropy.h"
#include "plait/kernels/embedding.h"
#include "plait/kernels/gelu.h"
#include "plait/kernels/layernorm.h"
#include "plait/kernels/rmsnorm.h"
#include "plait/kernels/rotary.h"
#include "plait/kernels/swiglu.h"
#include "plait/kernels/vector_ops.h"

namespace plait::kernels {

void CpuBackend::convert(bf16* dst, const float* src, std::size_t n) { kernels::convert(dst, src, n); }
void CpuBackend::convert(float* dst, const bf16* src, std::size_t n) { kernels::convert(dst, src, n); }

OneDnnContext& CpuBackend::onednn() {
  if (!onednn_) {
    onednn_ = std::make_unique<OneDnnContext>(host_memory(), workspace_tracker_,
                                              MemoryCategory::kActivations);
  }
  return *onednn_;
}

void CpuBackend::matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias,
                                const bf16* residual, int n, int c, int oc) {
  matmul_forward_bf16(onednn(), out, inp, weight, bias, residual, n, c, oc);
}

void CpuBackend::matmul_backward_input(bf16* dinp, const bf16* dout, const bf16* weight, int n,
                                       int c, int oc, bool accumulate) {
  matmul_backward_input_bf16(onednn(), dinp, dout, weight, n, c, oc, accumulate);
}

void CpuBackend::matmul_backward_weight(float* dweight, float* dbias, const bf16* dout,
                                        const bf16* inp, int n, int c, int oc) {
  matmul_backward_weight_bf16(onednn(), dweight, dbias, dout, inp, n, c, oc);
}

void CpuBackend::layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                                   const bf16* weight, const bf16* bias, int n, int c,
                                   double eps) {
  kernels::layernorm_forward<bf16>(out, mean, rstd, inp, weight, bias, n, c, eps);
}

void CpuBackend::layernorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                          const bf16* inp, const bf16* weight, const float* mean,
                                          const float* rstd, int n, int c) {
  kernels::layernorm_backward_input<bf16>(dinp, dresidual, dout, inp, weight, mean, rstd, n, c);
}

void CpuBackend::layernorm_backward_weight(float* dweight, float* dbias, const bf16* dout,
                                           const bf16* inp, const float* mean, const float* rstd,
                                           int n, int c) {
  kernels::layernorm_backward_weight<bf16>(dweight, dbias, dout, inp, mean, rstd, n, c);
}

void CpuBackend::rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight,
                                 int n, int c, double eps) {
  kernels::rmsnorm_forward<bf16>(out, rstd, inp, weight, n, c, eps);
}

void CpuBackend::rmsnorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                        const bf16* inp, const bf16* weight, const float* rstd,
                                        int n, int c) {
  kernels::rmsnorm_backward_input<bf16>(dinp, dresidual, dout, inp, weight, rstd, n, c);
}

void CpuBackend::rmsnorm_backward_weight(float* dweight, const bf16* dout, const bf16* inp,
                                         const float* rstd, int n, int c) {
  kernels::rmsnorm_backward_weight<bf16>(dweight, dout, inp, rstd, n, c);
}

void CpuBackend::gelu_forward(bf16* out, const bf16* inp, std::size_t n) {
  kernels::gelu_forward<bf16>(out, inp, n);
}

void CpuBackend::gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::size_t n) {
  kernels::gelu_backward<bf16>(dinp, inp, dout, n);
}

void CpuBackend::swiglu_forward(bf16* out, const bf16* gate_up, int n, int f) {
  kernels::swiglu_forward<bf16>(out, gate_up, n, f);
}

void CpuBackend::swiglu_backward(bf16* dgate_up, const bf16* dout, const bf16* gate_up, int n,
                                 int f) {
  kernels::swiglu_backward<bf16>(dgate_up, dout, gate_up, n, f);
}

void CpuBackend::rotary_forward(bf16* x, int batch, int s, int heads, int head_dim, int row_stride,
                                int pos0, double theta) {
  kernels::rotary_forward<bf16>(x, batch, s, heads, head_dim, row_stride, pos0, theta);
}

void CpuBackend::rotary_backward(bf16* dx, int batch, int s, int heads, int head_dim,
                                 int row_stride, int pos0, double theta) {
  kernels::rotary_backward<bf16>(dx, batch, s, heads, head_dim, row_stride, pos0, theta);
}

void CpuBackend::attention_forward(bf16* out, float* lse, const bf16* q,
                                   std::span<const KVBlock<bf16>> blocks, int batch, int s, int c,
                                   int heads, int kv_heads, DocumentMask mask) {
  kernels::attention_forward<bf16>(out, lse, q, blocks, batch, s, c, heads, kv_heads, mask);
}

void CpuBackend::attention_backward(bf16* dq, std::span<const KVBlock<bf16>> blocks,
                                    const bf16* dout, const bf16* q, const bf16* out,
                                    const float* lse, int batch, int s, int c, int heads,
                                    int kv_heads, float* workspace, DocumentMask mask) {
  kernels::attention_backward<bf16>(dq, blocks, dout, q, out, lse, batch, s, c, heads, kv_heads,
                                    workspace, mask);
}

void CpuBackend::embedding_forward(bf16* out, const std::int32_t* tokens, const bf16* wte,
                                   const bf16* wpe, int batch, int s, int c, int pos0, int vocab) {
  kernels::embedding_forward<bf16>(out, tokens, wte, wpe, batch, s, c, pos0, vocab);
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, const bf16* dout,
                                    const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                    int /*vocab*/) {
  kernels::embedding_backward<bf16>(dwte, dwpe, dout, tokens, batch, s, c, pos0);
}

double CpuBackend::cross_entropy_forward_backward(bf16* logits, float* losses,
                                                  const std::int32_t* targets, int n, int v,
                                                  double loss_scale) {
  return kernels::cross_entropy_forward_backward<bf16>(logits, losses, targets, n, v, loss_scale);
}

void CpuBackend::adamw_update(float* params, bf16* copy, const float* grads, float* m, float* v,
                              std::size_t n, const AdamWHyper& hyper) {
  kernels::adamw_update(params, copy, grads, m, v, n, hyper);
}

}  // namespace plait::kernels
