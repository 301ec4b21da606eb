// The CPU backend's tensor-parallel kernels (backend.h, "Tensor parallelism"): the kernels of
// bf16_matmul.h, vector_ops.h, embedding.h and vocab_parallel_cross_entropy.h, in fp32 and bf16.
#include "plait/kernels/bf16_matmul.h"
#include "plait/kernels/cpu_backend.h"
#include "plait/kernels/embedding.h"
#include "plait/kernels/vector_ops.h"
#include "plait/kernels/vocab_parallel_cross_entropy.h"

namespace plait::kernels {

void CpuBackend::matmul_forward_partial(float* out, const bf16* inp, const bf16* weight, int n,
                                        int c, int oc) {
  matmul_forward_bf16_fp32(onednn(), out, inp, weight, n, c, oc);
}

void CpuBackend::matmul_backward_input_partial(float* dinp, const bf16* dout, const bf16* weight,
                                               int n, int c, int oc, bool accumulate) {
  matmul_backward_input_bf16_fp32(onednn(), dinp, dout, weight, n, c, oc, accumulate);
}

void CpuBackend::add_bias_residual(float* out, const float* sum, const float* bias,
                                   const float* residual, int n, int c) {
  kernels::add_bias_residual<float>(out, sum, bias, residual, n, c);
}

void CpuBackend::add_bias_residual(bf16* out, const float* sum, const bf16* bias,
                                   const bf16* residual, int n, int c) {
  kernels::add_bias_residual<bf16>(out, sum, bias, residual, n, c);
}

void CpuBackend::embedding_forward_shard(float* out, const std::int32_t* tokens,
                                         const float* wte_rows, const float* wpe, int batch, int s,
                                         int c, int pos0, int vocab, int vocab_begin, int rows) {
  kernels::embedding_forward_shard<float>(out, tokens, wte_rows, wpe, batch, s, c, pos0, vocab,
                                          vocab_begin, rows);
}

void CpuBackend::embedding_forward_shard(float* out, const std::int32_t* tokens,
                                         const bf16* wte_rows, const bf16* wpe, int batch, int s,
                                         int c, int pos0, int vocab, int vocab_begin, int rows) {
  kernels::embedding_forward_shard<bf16>(out, tokens, wte_rows, wpe, batch, s, c, pos0, vocab,
                                         vocab_begin, rows);
}

void CpuBackend::embedding_backward_shard(float* dwte_rows, float* dwpe, const float* dout,
                                          const std::int32_t* tokens, int batch, int s, int c,
                                          int pos0, int vocab_begin, int rows) {
  kernels::embedding_backward_shard<float>(dwte_rows, dwpe, dout, tokens, batch, s, c, pos0,
                                           vocab_begin, rows);
}

void CpuBackend::embedding_backward_shard(float* dwte_rows, float* dwpe, const bf16* dout,
                                          const std::int32_t* tokens, int batch, int s, int c,
                                          int pos0, int vocab_begin, int rows) {
  kernels::embedding_backward_shard<bf16>(dwte_rows, dwpe, dout, tokens, batch, s, c, pos0,
                                          vocab_begin, rows);
}

void CpuBackend::cross_entropy_shard_max(const float* logits, const std::int32_t* targets, int n,
                                         int v_local, int v_valid, int vocab_begin, int vocab,
                                         float* max, float* target_logit) {
  kernels::cross_entropy_shard_max<float>(logits, targets, n, v_local, v_valid, vocab_begin, vocab,
                                          max, target_logit);
}

void CpuBackend::cross_entropy_shard_max(const bf16* logits, const std::int32_t* targets, int n,
                                         int v_local, int v_valid, int vocab_begin, int vocab,
                                         float* max, float* target_logit) {
  kernels::cross_entropy_shard_max<bf16>(logits, targets, n, v_local, v_valid, vocab_begin, vocab,
                                         max, target_logit);
}

void CpuBackend::cross_entropy_shard_sum(const float* logits, int n, int v_local, int v_valid,
                                         const float* max, double* sum) {
  kernels::cross_entropy_shard_sum<float>(logits, n, v_local, v_valid, max, sum);
}

void CpuBackend::cross_entropy_shard_sum(const bf16* logits, int n, int v_local, int v_valid,
                                         const float* max, double* sum) {
  kernels::cross_entropy_shard_sum<bf16>(logits, n, v_local, v_valid, max, sum);
}

double CpuBackend::cross_entropy_shard_finish(float* logits, float* losses,
                                              const std::int32_t* targets, int n, int v_local,
                                              int v_valid, int vocab_begin, const float* max,
                                              const double* sum, const float* target_logit,
                                              double loss_scale) {
  return kernels::cross_entropy_shard_finish<float>(logits, losses, targets, n, v_local, v_valid,
                                                    vocab_begin, max, sum, target_logit, loss_scale);
}

double CpuBackend::cross_entropy_shard_finish(bf16* logits, float* losses,
                                              const std::int32_t* targets, int n, int v_local,
                                              int v_valid, int vocab_begin, const float* max,
                                              const double* sum, const float* target_logit,
                                              double loss_scale) {
  return kernels::cross_entropy_shard_finish<bf16>(logits, losses, targets, n, v_local, v_valid,
                                                   vocab_begin, max, sum, target_logit, loss_scale);
}

}  // namespace plait::kernels
