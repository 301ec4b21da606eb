#pragma once
// The CUDA backend (kernels/backend.h) in both precisions, fp32 and bf16 mixed precision
// (spec/precision_policy.h): device memory from cudaMalloc, copies and zeroing as asynchronous
// operations on its one stream (its Context's), events as cudaEvents recorded on it, and every
// kernel entry point a launcher of this directory on that stream — in bf16 the launchers' bf16
// instantiations (GEMMs through cuBLASLt with bf16 operands and fp32 accumulation, weight and
// bias gradients accumulated into fp32; attention with fp32 lse and dK/dV accumulators; norms'
// statistics, losses and AdamW's master and moments fp32), plus the fp32 <-> bf16 conversions
// of vector_ops.h. The tensor-parallel operations (backend.h's last section) are not
// overridden: in either precision beyond the fp32 partial GEMMs they throw, as tensor
// parallelism runs on the CPU backend only.
//
// What differs from the CPU backend behind the same interface:
//   - attention's backward workspace is B·H·s floats (D = rowsum(dout * out), one per query row
//     and head; attention_backward_workspace), where the CPU's is a tile scratch per thread; the
//     state kept from the forward is the same (B, H, s) log-sum-exp for both;
//   - cross-entropy uploads the host targets and sum_of_squares keeps its partial sums in device
//     staging of the backend's own (grown on demand, not charged to any MemoryTracker: a few
//     floats per row of the head's unit, ⌈N/16384⌉ doubles), and both copy their per-row losses
//     or sum back and synchronise, as the interface says;
//   - a device-to-host copy synchronises before returning, so the host may read what it asked for
//     (a pinned destination would otherwise still be in flight);
//   - attention's document mask (packed documents) is host memory in the interface, as the token
//     ids are: uploaded into staging of the backend's own (B x seq int32, untracked like the
//     targets' staging) when it changes.
//
// Status: both precisions run only on the CPU emulation of CUDA (kernels/cuda/emulation/), never
// on a GPU: a whole StageModel step of both families, fp32 and bf16, against the CPU backend's
// (tests/optim/cuda/cuda_backend_step_test.cpp). On a GPU the engine's parameters, gradients and
// bf16 compute copy are still host memory (core's ReservedBuffer, docs/engine.md "The backend
// seam"), which these kernels cannot read.
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "plait/kernels/backend.h"
#include "plait/kernels/cuda/context.h"

namespace plait::kernels::cuda {

struct DeviceDocumentMask;  // attention.h (not included here: its KVBlock would hide kernels::KVBlock)

class CudaBackend final : public Backend {
 public:
  // On the current device, with a Context of its own (its stream, cuBLASLt handle, workspace).
  CudaBackend();
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  const Context& context() const { return ctx_; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* block, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void zero(void* dst, std::size_t bytes) override;
  void fill(float* dst, std::size_t n, float value) override;

  Event record() override;
  bool ready(Event event) const override;
  void wait(Event event) override;
  void synchronize() override;
  bool computes_on_calling_thread() const override { return false; }

  std::size_t attention_backward_workspace(int batch, int s, int e, int heads,
                                           int head_dim) const override;
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      const float* residual, int n, int c, int oc) override;
  void matmul_backward_input(float* dinp, const float* dout, const float* weight, int n, int c,
                             int oc, bool accumulate) override;
  void matmul_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp,
                              int n, int c, int oc) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int n, int c,
                         double eps) override;
  void layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                const float* inp, const float* weight, const float* mean,
                                const float* rstd, int n, int c) override;
  void layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* mean, const float* rstd, int n,
                                 int c) override;
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n,
                       int c, double eps) override;
  void rmsnorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                              const float* inp, const float* weight, const float* rstd, int n,
                              int c) override;
  void rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                               const float* rstd, int n, int c) override;
  void gelu_forward(float* out, const float* inp, std::size_t n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) override;
  void swiglu_forward(float* out, const float* gate_up, int n, int f) override;
  void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int n,
                       int f) override;
  void rotary_forward(float* x, int batch, int s, int heads, int head_dim, int row_stride,
                      int pos0, double theta) override;
  void rotary_backward(float* dx, int batch, int s, int heads, int head_dim, int row_stride,
                       int pos0, double theta) override;
  void attention_forward(float* out, float* lse, const float* q,
                         std::span<const KVBlock<float>> blocks, int batch, int s, int c,
                         int heads, int kv_heads, DocumentMask mask = {}) override;
  void attention_backward(float* dq, std::span<const KVBlock<float>> blocks, const float* dout,
                          const float* q, const float* out, const float* lse, int batch, int s,
                          int c, int heads, int kv_heads, float* workspace,
                          DocumentMask mask = {}) override;
  void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                         const float* wpe, int batch, int s, int c, int pos0,
                         int vocab) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                          int batch, int s, int c, int pos0, int vocab) override;
  double cross_entropy_forward_backward(float* logits, float* losses, const std::int32_t* targets,
                                        int n, int v, double loss_scale) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const AdamWHyper& hyper) override;
  double sum_of_squares(const float* x, std::size_t n) override;
  void accumulate(float* dst, const float* src, std::size_t n) override;
  void normal_init(float* values, std::size_t n, double std, std::uint64_t key) override;

  // ---- bf16 mixed precision: the bf16 instantiations of the same launchers. Inside the class
  // bf16 is the engine's (core/bf16.h, as in backend.h); the kernels' is cuda::bf16
  // (__nv_bfloat16), the same 16 bits, which the definitions pass on.
  using bf16 = plait::bf16;
  bool supports_bf16() const override { return true; }
  void convert(bf16* dst, const float* src, std::size_t n) override;
  void convert(float* dst, const bf16* src, std::size_t n) override;
  void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias,
                      const bf16* residual, int n, int c, int oc) override;
  void matmul_backward_input(bf16* dinp, const bf16* dout, const bf16* weight, int n, int c,
                             int oc, bool accumulate) override;
  void matmul_backward_weight(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                              int n, int c, int oc) override;
  void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                         const bf16* bias, int n, int c, double eps) override;
  void layernorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                const bf16* inp, const bf16* weight, const float* mean,
                                const float* rstd, int n, int c) override;
  void layernorm_backward_weight(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                 const float* mean, const float* rstd, int n, int c) override;
  void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int n, int c,
                       double eps) override;
  void rmsnorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                              const bf16* inp, const bf16* weight, const float* rstd, int n,
                              int c) override;
  void rmsnorm_backward_weight(float* dweight, const bf16* dout, const bf16* inp,
                               const float* rstd, int n, int c) override;
  void gelu_forward(bf16* out, const bf16* inp, std::size_t n) override;
  void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::size_t n) override;
  void swiglu_forward(bf16* out, const bf16* gate_up, int n, int f) override;
  void swiglu_backward(bf16* dgate_up, const bf16* dout, const bf16* gate_up, int n,
                       int f) override;
  void rotary_forward(bf16* x, int batch, int s, int heads, int head_dim, int row_stride,
                      int pos0, double theta) override;
  void rotary_backward(bf16* dx, int batch, int s, int heads, int head_dim, int row_stride,
                       int pos0, double theta) override;
  void attention_forward(bf16* out, float* lse, const bf16* q,
                         std::span<const KVBlock<bf16>> blocks, int batch, int s, int c,
                         int heads, int kv_heads, DocumentMask mask = {}) override;
  void attention_backward(bf16* dq, std::span<const KVBlock<bf16>> blocks, const bf16* dout,
                          const bf16* q, const bf16* out, const float* lse, int batch, int s,
                          int c, int heads, int kv_heads, float* workspace,
                          DocumentMask mask = {}) override;
  void embedding_forward(bf16* out, const std::int32_t* tokens, const bf16* wte, const bf16* wpe,
                         int batch, int s, int c, int pos0, int vocab) override;
  void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const std::int32_t* tokens,
                          int batch, int s, int c, int pos0, int vocab) override;
  double cross_entropy_forward_backward(bf16* logits, float* losses, const std::int32_t* targets,
                                        int n, int v, double loss_scale) override;
  void adamw_update(float* params, bf16* copy, const float* grads, float* m, float* v,
                    std::size_t n, const AdamWHyper& hyper) override;

 private:
  // Device scratch of at least `bytes`, grown (never shrunk) on demand. Reused across calls:
  // the stream runs them in order, so a later call's writes come after an earlier one's reads.
  struct Staging {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  void* staging(Staging& s, std::size_t bytes);
  // Either precision's cross-entropy (T: float or cuda::bf16): the host targets uploaded, the
  // launcher, the per-row losses copied back and added in double.
  template <typename T>
  double cross_entropy(T* logits, float* losses, const std::int32_t* targets, int n, int v,
                       double loss_scale);
  // Attention's document mask (host memory, kernels/attention.h) in device memory: uploaded to
  // staging on the stream when it differs from the last one uploaded (the micro-batch's first
  // layer; its other layers, F and B, reuse it), ordered after the kernels that read the old one.
  DeviceDocumentMask device_mask(const DocumentMask& mask, int batch);

  Context ctx_;
  Staging targets_, sum_workspace_, sum_result_, mask_;
  std::vector<std::int32_t> mask_host_;  // the mask in mask_ (B x stride), for the comparison
  int mask_stride_ = 0;
  std::vector<float> host_losses_;
  std::uint64_t recorded_ = 0;
  // Recorded and not yet known complete, oldest first (sequence, event).
  mutable std::deque<std::pair<std::uint64_t, cudaEvent_t>> pending_;
  mutable std::uint64_t completed_ = 0;  // every sequence <= this is complete
};

}  // namespace plait::kernels::cuda
