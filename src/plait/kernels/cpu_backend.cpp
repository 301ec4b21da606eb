#include "plait/kernels/cpu_backend.h"

#include <omp.h>

#include "plait/kernels/cross_entropy.h"
#include "plait/kernels/embedding.h"
#include "plait/kernels/gelu.h"
#include "plait/kernels/grad_norm.h"
#include "plait/kernels/layernorm.h"
#include "plait/kernels/matmul.h"
#include "plait/kernels/normal_init.h"
#include "plait/kernels/rmsnorm.h"
#include "plait/kernels/rotary.h"
#include "plait/kernels/swiglu.h"
#include "plait/kernels/vector_ops.h"

namespace plait::kernels {
CpuBackend& cpu_backend() {
  // The backend's oneDNN context frees its workspace through host_memory() when the backend is
  // destroyed at exit, so host_memory()'s object must outlive it: function-local statics are
  // destroyed in the reverse order of their construction, so construct it first. (Constructed on
  // the context's first use instead, it was destroyed before the backend, and UBSan saw the
  // workspace freed through a destroyed object's vtable.)
  static MemorySpace& memory = host_memory();
  static CpuBackend backend;
  (void)memory;
  return backend;
}

void* CpuBackend::allocate(std::size_t bytes) { return host_memory().allocate(bytes); }

void CpuBackend::deallocate(void* block, std::size_t bytes) { host_memory().deallocate(block, bytes); }

void CpuBackend::copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  host_memory().copy(dst, src, bytes, kind);
}

void CpuBackend::zero(void* dst, std::size_t bytes) { zero_bytes(dst, bytes); }

void CpuBackend::fill(float* dst, std::size_t n, float value) { kernels::fill(dst, n, value); }

bool CpuBackend::computes_on_calling_thread() const { return omp_get_max_threads() == 1; }

std::size_t CpuBackend::attention_backward_workspace(int, int, int, int, int head_dim) const {
  // One tile scratch per OpenMP thread (attention.h), whatever the batch, heads and lengths.
  return kernels::attention_backward_workspace(head_dim, omp_get_max_threads());
}

void CpuBackend::matmul_forward(float* out, const float* inp, const float* weight,
                                const float* bias, const float* residual, int n, int c, int oc) {
  kernels::matmul_forward<float>(out, inp, weight, bias, residual, n, c, oc);
}

void CpuBackend::matmul_backward_input(float* dinp, const float* dout, const float* weight, int n,
                                       int c, int oc, bool accumulate) {
  kernels::matmul_backward_input<float>(dinp, dout, weight, n, c, oc, accumulate);
}

void CpuBackend::matmul_backward_weight(float* dweight, float* dbias, const float* dout,
                                        const float* inp, int n, int c, int oc) {
  kernels::matmul_backward_weight<float>(dweight, dbias, dout, inp, n, c, oc);
}

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int n, int c,
                                   double eps) {
  kernels::layernorm_forward<float>(out, mean, rstd, inp, weight, bias, n, c, eps);
}

void CpuBackend::layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                          const float* inp, const float* weight,
                                          const float* mean, const float* rstd, int n, int c) {
  kernels::layernorm_backward_input<float>(dinp, dresidual, dout, inp, weight, mean, rstd, n, c);
}

void CpuBackend::layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                           const float* inp, const float* mean, const float* rstd,
                                           int n, int c) {
  kernels::layernorm_backward_weight<float>(dweight, dbias, dout, inp, mean, rstd, n, c);
}

void CpuBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                 int n, int c, double eps) {
  kernels::rmsnorm_forward<float>(out, rstd, inp, weight, n, c, eps);
}

void CpuBackend::rmsnorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                        const float* inp, const float* weight, const float* rstd,
                                        int n, int c) {
  kernels::rmsnorm_backward_input<float>(dinp, dresidual, dout, inp, weight, rstd, n, c);
}

void CpuBackend::rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                         const float* rstd, int n, int c) {
  kernels::rmsnorm_backward_weight<float>(dweight, dout, inp, rstd, n, c);
}

void CpuBackend::gelu_forward(float* out, const float* inp, std::size_t n) {
  kernels::gelu_forward<float>(out, inp, n);
}

void CpuBackend::gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  kernels::gelu_backward<float>(dinp, inp, dout, n);
}

void CpuBackend::swiglu_forward(float* out, const float* gate_up, int n, int f) {
  kernels::swiglu_forward<float>(out, gate_up, n, f);
}

void CpuBackend::swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int n,
                                 int f) {
  kernels::swiglu_backward<float>(dgate_up, dout, gate_up, n, f);
}

void CpuBackend::rotary_forward(float* x, int batch, int s, int heads, int head_dim,
                                int row_stride, int pos0, double theta) {
  kernels::rotary_forward<float>(x, batch, s, heads, head_dim, row_stride, pos0, theta);
}

void CpuBackend::rotary_backward(float* dx, int batch, int s, int heads, int head_dim,
                                 int row_stride, int pos0, double theta) {
  kernels::rotary_backward<float>(dx, batch, s, heads, head_dim, row_stride, pos0, theta);
}

void CpuBackend::attention_forward(float* out, float* lse, const float* q,
                                   std::span<const KVBlock<float>> blocks, int batch, int s, int c,
                                   int heads, int kv_heads, DocumentMask mask) {
  kernels::attention_forward<float>(out, lse, q, blocks, batch, s, c, heads, kv_heads, mask);
}

void CpuBackend::attention_backward(float* dq, std::span<const KVBlock<float>> blocks,
                                    const float* dout, const float* q, const float* out,
                                    const float* lse, int batch, int s, int c, int heads,
                                    int kv_heads, float* workspace, DocumentMask mask) {
  kernels::attention_backward<float>(dq, blocks, dout, q, out, lse, batch, s, c, heads, kv_heads,
                                     workspace, mask);
}

void CpuBackend::embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                   const float* wpe, int batch, int s, int c, int pos0,
                                   int vocab) {
  kernels::embedding_forward<float>(out, tokens, wte, wpe, batch, s, c, pos0, vocab);
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                    const std::int32_t* tokens, int batch, int s, int c,
                                    int pos0, int /*vocab*/) {
  kernels::embedding_backward<float>(dwte, dwpe, dout, tokens, batch, s, c, pos0);
}

double CpuBackend::cross_entropy_forward_backward(float* logits, float* losses,
                                                  const std::int32_t* targets, int n, int v,
                                                  double loss_scale) {
  return kernels::cross_entropy_forward_backward<float>(logits, losses, targets, n, v, loss_scale);
}

void CpuBackend::adamw_update(float* params, const float* grads, float* m, float* v,
                              std::size_t n, const AdamWHyper& hyper) {
  kernels::adamw_update(params, grads, m, v, n, hyper);
}

double CpuBackend::sum_of_squares(const float* x, std::size_t n) {
  return kernels::sum_of_squares(x, n);
}

void CpuBackend::accumulate(float* dst, const float* src, std::size_t n) {
  kernels::accumulate(dst, src, n);
}

void CpuBackend::normal_init(float* values, std::size_t n, double std, std::uint64_t key) {
  kernels::normal_init(values, n, std, key);
}

}  // namespace plait::kernels
