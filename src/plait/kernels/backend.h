#pragma once
// The backend seam: where the engine's memory lives and which kernels compute on it. model/
// (the blocks, StageModel, the tensor pool), optim/ and the runtime's data-moving code hold
// pointers to backend memory and call only these operations, so a backend other than the CPU
// (the CUDA one, over kernels/cuda/'s launchers) can run the same training step unchanged.
//
// Memory: a backend is a MemorySpace (core/memory_space.h): raw blocks that whoever asks charges
// to a MemoryTracker category first (TensorPool by the exact bytes it hands out, core's Buffer by
// its size), so the accounting, the peaks and the capacity error stay the engine's, whatever the
// backend; copies by direction; zero. The backend adds fill, ordering and the kernels.
//
// Ordering: every operation is issued on the backend's one compute stream in program order; an
// event marks a point on it (cudaEventRecord), `wait` blocks the calling thread until the
// stream has passed it (cudaEventSynchronize), `synchronize` until everything issued is done.
// Host memory handed to an operation (a copy from the host, the tokens and targets) may be
// reused once the call returns. Kernels that return a value to the host (the loss, the sum of
// squares) synchronise. The CPU backend runs everything on the calling thread (with OpenMP
// inside the kernels) before returning, so each of its events is complete when recorded.
//
// Kernels: the fp32 forms of kernels/<op>.h, same arguments in the same order, same formulas
// (the headers beside this one document them), plus the few the CUDA kernels (kernels/cuda/)
// need and the CPU's do not (the attention workspace's batch and heads, the embedding
// backward's vocab), which the CPU backend ignores; it calls those functions, so its
// results are bitwise the engine's before the seam.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "plait/core/bf16.h"
#include "plait/core/memory_space.h"
#include "plait/kernels/adamw.h"
#include "plait/kernels/attention.h"

namespace plait::kernels {

// A point on the backend's compute stream; sequence 0 is "nothing issued yet".
struct Event {
  std::uint64_t sequence = 0;
};

class Backend : public MemorySpace {
 public:
  virtual std::string_view name() const = 0;

  // ---- memory (beyond MemorySpace's allocate, deallocate, copy and zero)
  virtual void fill(float* dst, std::size_t n, float value) = 0;

  // ---- ordering
  virtual Event record() = 0;
  virtual bool ready(Event event) const = 0;
  virtual void wait(Event event) = 0;
  virtual void synchronize() = 0;
  // Whether kernels run on the calling thread alone (the CPU backend with one OpenMP thread):
  // then that thread's CPU time is the compute's (runtime/device_emulator.h).
  virtual bool computes_on_calling_thread() const = 0;

  // ---- kernels (fp32; kernels/<op>.h)
  // Elements of attention_backward's workspace for a segment of s queries seeing e keys, batch
  // rows, heads query heads of head_dim (the CPU's is a tile scratch per OpenMP thread, from
  // head_dim alone, spec/attention_tiles.h; the CUDA one B·H·s).
  virtual std::size_t attention_backward_workspace(int batch, int s, int e, int heads,
                                                   int head_dim) const = 0;
  virtual void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                              const float* residual, int n, int c, int oc) = 0;
  virtual void matmul_backward_input(float* dinp, const float* dout, const float* weight, int n,
                                     int c, int oc, bool accumulate) = 0;
  virtual void matmul_backward_weight(float* dweight, float* dbias, const float* dout,
                                      const float* inp, int n, int c, int oc) = 0;
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int n, int c,
                                 double eps) = 0;
  virtual void layernorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                        const float* inp, const float* weight, const float* mean,
                                        const float* rstd, int n, int c) = 0;
  virtual void layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                         const float* inp, const float* mean, const float* rstd,
                                         int n, int c) = 0;
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                               int n, int c, double eps) = 0;
  virtual void rmsnorm_backward_input(float* dinp, const float* dresidual, const float* dout,
                                      const float* inp, const float* weight, const float* rstd,
                                      int n, int c) = 0;
  virtual void rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                       const float* rstd, int n, int c) = 0;
  virtual void gelu_forward(float* out, const float* inp, std::size_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) = 0;
  virtual void swiglu_forward(float* out, const float* gate_up, int n, int f) = 0;
  virtual void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int n,
                               int f) = 0;
  virtual void rotary_forward(float* x, int batch, int s, int heads, int head_dim, int row_stride,
                              int pos0, double theta) = 0;
  virtual void rotary_backward(float* dx, int batch, int s, int heads, int head_dim,
                               int row_stride, int pos0, double theta) = 0;
  // lse: (B, H, s) floats kept from the forward to the backward, each row's log-sum-exp (both
  // backends run FlashAttention-2 and never store the probabilities); the backward reads the
  // forward's output `out` too. mask: packed documents (attention.h, DocumentMask; host memory),
  // the backward's the forward's.
  virtual void attention_forward(float* out, float* lse, const float* q,
                                 std::span<const KVBlock<float>> blocks, int batch, int s, int c,
                                 int heads, int kv_heads, DocumentMask mask = {}) = 0;
  virtual void attention_backward(float* dq, std::span<const KVBlock<float>> blocks,
                                  const float* dout, const float* q, const float* out,
                                  const float* lse, int batch, int s, int c, int heads,
                                  int kv_heads, float* workspace, DocumentMask mask = {}) = 0;
  // tokens: device memory (copied there from the host by the caller).
  virtual void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                 const float* wpe, int batch, int s, int c, int pos0,
                                 int vocab) = 0;
  // vocab: the rows of dwte (the CUDA kernel partitions the token ids among its blocks by it;
  // the CPU's ignores it).
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                  int vocab) = 0;
  // Returns the scaled loss sum on the host (synchronises); losses: n floats of scratch. targets:
  // host memory (a device backend uploads them; the CPU reads them in place), because the unit
  // memory table (spec/unit_memory.h) counts no device copy of them.
  virtual double cross_entropy_forward_backward(float* logits, float* losses,
                                                const std::int32_t* targets, int n, int v,
                                                double loss_scale) = 0;
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                            const AdamWHyper& hyper) = 0;
  // Σ x² in double on the host (synchronises), the same for any thread count.
  virtual double sum_of_squares(const float* x, std::size_t n) = 0;
  // dst[i] += src[i] (the tied embedding's gradient copies summed).
  virtual void accumulate(float* dst, const float* src, std::size_t n) = 0;
  // values[i] = std · N(0, 1) from the counter-based draw key + i (kernels/normal_init.h).
  virtual void normal_init(float* values, std::size_t n, double std, std::uint64_t key) = 0;

  // ---- bf16 mixed precision (spec/precision_policy.h): the same operations with bf16
  // activations, K/V and compute weights, fp32 statistics, weight gradients, dK/dV
  // accumulators and losses, fp32 arithmetic inside. Overloads of the fp32 forms, so a block
  // templated on its activation type calls the right one. A backend without them throws
  // (backend.cpp); the CPU and CUDA backends have them all.
  virtual bool supports_bf16() const { return false; }
  // dst = round(src) and dst = widen(src), n elements.
  virtual void convert(bf16* dst, const float* src, std::size_t n);
  virtual void convert(float* dst, const bf16* src, std::size_t n);
  virtual void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias,
                              const bf16* residual, int n, int c, int oc);
  virtual void matmul_backward_input(bf16* dinp, const bf16* dout, const bf16* weight, int n,
                                     int c, int oc, bool accumulate);
  virtual void matmul_backward_weight(float* dweight, float* dbias, const bf16* dout,
                                      const bf16* inp, int n, int c, int oc);
  virtual void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                                 const bf16* weight, const bf16* bias, int n, int c, double eps);
  virtual void layernorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                        const bf16* inp, const bf16* weight, const float* mean,
                                        const float* rstd, int n, int c);
  virtual void layernorm_backward_weight(float* dweight, float* dbias, const bf16* dout,
                                         const bf16* inp, const float* mean, const float* rstd,
                                         int n, int c);
  virtual void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int n,
                               int c, double eps);
  virtual void rmsnorm_backward_input(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                      const bf16* inp, const bf16* weight, const float* rstd,
                                      int n, int c);
  virtual void rmsnorm_backward_weight(float* dweight, const bf16* dout, const bf16* inp,
                                       const float* rstd, int n, int c);
  virtual void gelu_forward(bf16* out, const bf16* inp, std::size_t n);
  virtual void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::size_t n);
  virtual void swiglu_forward(bf16* out, const bf16* gate_up, int n, int f);
  virtual void swiglu_backward(bf16* dgate_up, const bf16* dout, const bf16* gate_up, int n,
                               int f);
  virtual void rotary_forward(bf16* x, int batch, int s, int heads, int head_dim, int row_stride,
                              int pos0, double theta);
  virtual void rotary_backward(bf16* dx, int batch, int s, int heads, int head_dim,
                               int row_stride, int pos0, double theta);
  // lse: (B, H, s) fp32 log-sum-exp per query row (FlashAttention-2); the backward reads the
  // forward's output. workspace: attention_backward_workspace(...) fp32 elements.
  virtual void attention_forward(bf16* out, float* lse, const bf16* q,
                                 std::span<const KVBlock<bf16>> blocks, int batch, int s, int c,
                                 int heads, int kv_heads, DocumentMask mask = {});
  virtual void attention_backward(bf16* dq, std::span<const KVBlock<bf16>> blocks,
                                  const bf16* dout, const bf16* q, const bf16* out,
                                  const float* lse, int batch, int s, int c, int heads,
                                  int kv_heads, float* workspace, DocumentMask mask = {});
  virtual void embedding_forward(bf16* out, const std::int32_t* tokens, const bf16* wte,
                                 const bf16* wpe, int batch, int s, int c, int pos0, int vocab);
  virtual void embedding_backward(float* dwte, float* dwpe, const bf16* dout,
                                  const std::int32_t* tokens, int batch, int s, int c, int pos0,
                                  int vocab);
  virtual double cross_entropy_forward_backward(bf16* logits, float* losses,
                                                const std::int32_t* targets, int n, int v,
                                                double loss_scale);
  // The fp32 update, also writing the updated master rounded to bf16 into `copy`.
  virtual void adamw_update(float* params, bf16* copy, const float* grads, float* m, float* v,
                            std::size_t n, const AdamWHyper& hyper);

  // ---- Tensor parallelism (model/tensor_parallel.h), in both activation types: the partial
  // products a TP group sums in fp32 (a row-parallel linear's output, a column-parallel one's
  // input gradient; bf16 operands, fp32 results), the end of a reduce-scattered row-parallel
  // output (vector_ops.h, add_bias_residual), the vocabulary-parallel embedding (embedding.h,
  // *_shard) and cross-entropy (vocab_parallel_cross_entropy.h). The fp32 GEMMs default to the
  // fp32 kernels above; the rest throw unless the backend implements them (the CPU backend does;
  // tensor parallelism runs there).
  virtual void matmul_forward_partial(float* out, const float* inp, const float* weight, int n, int c,
                                      int oc);
  virtual void matmul_forward_partial(float* out, const bf16* inp, const bf16* weight, int n, int c,
                                      int oc);
  virtual void matmul_backward_input_partial(float* dinp, const float* dout, const float* weight,
                                             int n, int c, int oc, bool accumulate);
  virtual void matmul_backward_input_partial(float* dinp, const bf16* dout, const bf16* weight,
                                             int n, int c, int oc, bool accumulate);
  virtual void add_bias_residual(float* out, const float* sum, const float* bias,
                                 const float* residual, int n, int c);
  virtual void add_bias_residual(bf16* out, const float* sum, const bf16* bias,
                                 const bf16* residual, int n, int c);
  virtual void embedding_forward_shard(float* out, const std::int32_t* tokens, const float* wte_rows,
                                       const float* wpe, int batch, int s, int c, int pos0,
                                       int vocab, int vocab_begin, int rows);
  virtual void embedding_forward_shard(float* out, const std::int32_t* tokens, const bf16* wte_rows,
                                       const bf16* wpe, int batch, int s, int c, int pos0,
                                       int vocab, int vocab_begin, int rows);
  virtual void embedding_backward_shard(float* dwte_rows, float* dwpe, const float* dout,
                                        const std::int32_t* tokens, int batch, int s, int c,
                                        int pos0, int vocab_begin, int rows);
  virtual void embedding_backward_shard(float* dwte_rows, float* dwpe, const bf16* dout,
                                        const std::int32_t* tokens, int batch, int s, int c,
                                        int pos0, int vocab_begin, int rows);
  virtual void cross_entropy_shard_max(const float* logits, const std::int32_t* targets, int n,
                                       int v_local, int v_valid, int vocab_begin, int vocab,
                                       float* max, float* target_logit);
  virtual void cross_entropy_shard_max(const bf16* logits, const std::int32_t* targets, int n,
                                       int v_local, int v_valid, int vocab_begin, int vocab,
                                       float* max, float* target_logit);
  virtual void cross_entropy_shard_sum(const float* logits, int n, int v_local, int v_valid,
                                       const float* max, double* sum);
  virtual void cross_entropy_shard_sum(const bf16* logits, int n, int v_local, int v_valid,
                                       const float* max, double* sum);
  virtual double cross_entropy_shard_finish(float* logits, float* losses,
                                            const std::int32_t* targets, int n, int v_local,
                                            int v_valid, int vocab_begin, const float* max,
                                            const double* sum, const float* target_logit,
                                            double loss_scale);
  virtual double cross_entropy_shard_finish(bf16* logits, float* losses,
                                            const std::int32_t* targets, int n, int v_local,
                                            int v_valid, int vocab_begin, const float* max,
                                            const double* sum, const float* target_logit,
                                            double loss_scale);
};

}  // namespace plait::kernels
