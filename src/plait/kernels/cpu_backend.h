#pragma once
// The CPU backend: host memory (core/host_memory.h; zeroing large blocks in parallel) and the
// fp32 CPU kernels of this directory (OpenBLAS, OpenMP).
// The reference and the default: every other backend is tested against it, and the engine's
// results through it are bitwise those of calling the kernels directly. Everything runs on the
// calling thread before the call returns (OpenMP threads inside the kernels), so its events are
// complete when recorded. Stateless apart from the event counter. Not final: tests derive from
// it to observe the calls the engine makes through the seam.
#include <atomic>
#include <memory>

#include "plait/core/memory_tracker.h"

#include "plait/kernels/backend.h"
#include "plait/kernels/onednn_context.h"

namespace plait::kernels {

class CpuBackend : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* block, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void zero(void* dst, std::size_t bytes) override;
  void fill(float* dst, std::size_t n, float value) override;

  Event record() override { return Event{++recorded_}; }
  bool ready(Event) const override { return true; }
  void wait(Event) override {}
  void synchronize() override {}
  bool computes_on_calling_thread() const override;

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

  // bf16 (cpu_backend_bf16.cpp).
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

  // Tensor parallelism (cpu_backend_tensor_parallel.cpp), fp32 and bf16.
  void matmul_forward_partial(float* out, const bf16* inp, const bf16* weight, int n, int c,
                              int oc) override;
  void matmul_backward_input_partial(float* dinp, const bf16* dout, const bf16* weight, int n,
                                     int c, int oc, bool accumulate) override;
  using Backend::matmul_forward_partial;
  using Backend::matmul_backward_input_partial;
  void add_bias_residual(float* out, const float* sum, const float* bias, const float* residual,
                         int n, int c) override;
  void add_bias_residual(bf16* out, const float* sum, const bf16* bias, const bf16* residual,
                         int n, int c) override;
  void embedding_forward_shard(float* out, const std::int32_t* tokens, const float* wte_rows,
                               const float* wpe, int batch, int s, int c, int pos0, int vocab,
                               int vocab_begin, int rows) override;
  void embedding_forward_shard(float* out, const std::int32_t* tokens, const bf16* wte_rows,
                               const bf16* wpe, int batch, int s, int c, int pos0, int vocab,
                               int vocab_begin, int rows) override;
  void embedding_backward_shard(float* dwte_rows, float* dwpe, const float* dout,
                                const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                int vocab_begin, int rows) override;
  void embedding_backward_shard(float* dwte_rows, float* dwpe, const bf16* dout,
                                const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                int vocab_begin, int rows) override;
  void cross_entropy_shard_max(const float* logits, const std::int32_t* targets, int n,
                               int v_local, int v_valid, int vocab_begin, int vocab, float* max,
                               float* target_logit) override;
  void cross_entropy_shard_max(const bf16* logits, const std::int32_t* targets, int n,
                               int v_local, int v_valid, int vocab_begin, int vocab, float* max,
                               float* target_logit) override;
  void cross_entropy_shard_sum(const float* logits, int n, int v_local, int v_valid,
                               const float* max, double* sum) override;
  void cross_entropy_shard_sum(const bf16* logits, int n, int v_local, int v_valid,
                               const float* max, double* sum) override;
  double cross_entropy_shard_finish(float* logits, float* losses, const std::int32_t* targets,
                                    int n, int v_local, int v_valid, int vocab_begin,
                                    const float* max, const double* sum,
                                    const float* target_logit, double loss_scale) override;
  double cross_entropy_shard_finish(bf16* logits, float* losses, const std::int32_t* targets,
                                    int n, int v_local, int v_valid, int vocab_begin,
                                    const float* max, const double* sum,
                                    const float* target_logit, double loss_scale) override;

  // The oneDNN context of the bf16 GEMMs (created at the first one): its ISA, path, primitive
  // cache and workspace. The workspace is host memory charged to workspace_tracker() (category
  // activations), not to a stage's tracker.
  OneDnnContext& onednn();
  const MemoryTracker& workspace_tracker() const { return workspace_tracker_; }

 private:
  std::atomic<std::uint64_t> recorded_{0};
  MemoryTracker workspace_tracker_;
  std::unique_ptr<OneDnnContext> onednn_;
};

// The process's CPU backend: the default of everything that takes a Backend.
CpuBackend& cpu_backend();

}  // namespace plait::kernels
