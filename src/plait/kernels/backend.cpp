#include "plait/kernels/backend.h"

#include <string>

#include "plait/core/error.h"

namespace plait::kernels {
namespace {

// A backend that has not implemented mixed precision says so where it is first asked for it,
// rather than computing in a type the precision policy did not choose.
[[noreturn]] void no_bf16(const Backend& backend, const char* op) {
  throw Error("the " + std::string(backend.name()) + " backend has no bf16 " + op +
              " (bf16 mixed precision runs on the CPU and CUDA backends; use \"precision\": "
              "\"fp32\")");
}

// Tensor parallelism's kernels beyond the fp32 GEMMs are the CPU backend's so far.
[[noreturn]] void no_tensor_parallel(const Backend& backend, const char* op) {
  throw Error("the " + std::string(backend.name()) + " backend has no tensor-parallel " + op +
              " (tensor parallelism runs on the CPU backend)");
}

}  // namespace

void Backend::matmul_forward_partial(float* out, const float* inp, const float* weight, int n, int c,
                                     int oc) {
  matmul_forward(out, inp, weight, nullptr, nullptr, n, c, oc);
}
void Backend::matmul_forward_partial(float*, const bf16*, const bf16*, int, int, int) {
  no_tensor_parallel(*this, "bf16 matmul");
}
void Backend::matmul_backward_input_partial(float* dinp, const float* dout, const float* weight,
                                            int n, int c, int oc, bool accumulate) {
  matmul_backward_input(dinp, dout, weight, n, c, oc, accumulate);
}
void Backend::matmul_backward_input_partial(float*, const bf16*, const bf16*, int, int, int, bool) {
  no_tensor_parallel(*this, "bf16 matmul");
}
void Backend::add_bias_residual(float*, const float*, const float*, const float*, int, int) {
  no_tensor_parallel(*this, "bias and residual add");
}
void Backend::add_bias_residual(bf16*, const float*, const bf16*, const bf16*, int, int) {
  no_tensor_parallel(*this, "bias and residual add");
}
void Backend::embedding_forward_shard(float*, const std::int32_t*, const float*, const float*, int,
                                      int, int, int, int, int, int) {
  no_tensor_parallel(*this, "embedding");
}
void Backend::embedding_forward_shard(float*, const std::int32_t*, const bf16*, const bf16*, int,
                                      int, int, int, int, int, int) {
  no_tensor_parallel(*this, "embedding");
}
void Backend::embedding_backward_shard(float*, float*, const float*, const std::int32_t*, int, int,
                                       int, int, int, int) {
  no_tensor_parallel(*this, "embedding");
}
void Backend::embedding_backward_shard(float*, float*, const bf16*, const std::int32_t*, int, int,
                                       int, int, int, int) {
  no_tensor_parallel(*this, "embedding");
}
void Backend::cross_entropy_shard_max(const float*, const std::int32_t*, int, int, int, int, int,
                                      float*, float*) {
  no_tensor_parallel(*this, "cross-entropy");
}
void Backend::cross_entropy_shard_max(const bf16*, const std::int32_t*, int, int, int, int, int,
                                      float*, float*) {
  no_tensor_parallel(*this, "cross-entropy");
}
void Backend::cross_entropy_shard_sum(const float*, int, int, int, const float*, double*) {
  no_tensor_parallel(*this, "cross-entropy");
}
void Backend::cross_entropy_shard_sum(const bf16*, int, int, int, const float*, double*) {
  no_tensor_parallel(*this, "cross-entropy");
}
double Backend::cross_entropy_shard_finish(float*, float*, const std::int32_t*, int, int, int, int,
                                           const float*, const double*, const float*, double) {
  no_tensor_parallel(*this, "cross-entropy");
}
double Backend::cross_entropy_shard_finish(bf16*, float*, const std::int32_t*, int, int, int, int,
                                           const float*, const double*, const float*, double) {
  no_tensor_parallel(*this, "cross-entropy");
}

void Backend::convert(bf16*, const float*, std::size_t) { no_bf16(*this, "conversion"); }
void Backend::convert(float*, const bf16*, std::size_t) { no_bf16(*this, "conversion"); }
void Backend::matmul_forward(bf16*, const bf16*, const bf16*, const bf16*, const bf16*, int, int,
                             int) {
  no_bf16(*this, "matmul");
}
void Backend::matmul_backward_input(bf16*, const bf16*, const bf16*, int, int, int, bool) {
  no_bf16(*this, "matmul");
}
void Backend::matmul_backward_weight(float*, float*, const bf16*, const bf16*, int, int, int) {
  no_bf16(*this, "matmul");
}
void Backend::layernorm_forward(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, int,
                                int, double) {
  no_bf16(*this, "layernorm");
}
void Backend::layernorm_backward_input(bf16*, const bf16*, const bf16*, const bf16*, const bf16*,
                                       const float*, const float*, int, int) {
  no_bf16(*this, "layernorm");
}
void Backend::layernorm_backward_weight(float*, float*, const bf16*, const bf16*, const float*,
                                        const float*, int, int) {
  no_bf16(*this, "layernorm");
}
void Backend::rmsnorm_forward(bf16*, float*, const bf16*, const bf16*, int, int, double) {
  no_bf16(*this, "rmsnorm");
}
void Backend::rmsnorm_backward_input(bf16*, const bf16*, const bf16*, const bf16*, const bf16*,
                                     const float*, int, int) {
  no_bf16(*this, "rmsnorm");
}
void Backend::rmsnorm_backward_weight(float*, const bf16*, const bf16*, const float*, int, int) {
  no_bf16(*this, "rmsnorm");
}
void Backend::gelu_forward(bf16*, const bf16*, std::size_t) { no_bf16(*this, "gelu"); }
void Backend::gelu_backward(bf16*, const bf16*, const bf16*, std::size_t) {
  no_bf16(*this, "gelu");
}
void Backend::swiglu_forward(bf16*, const bf16*, int, int) { no_bf16(*this, "swiglu"); }
void Backend::swiglu_backward(bf16*, const bf16*, const bf16*, int, int) {
  no_bf16(*this, "swiglu");
}
void Backend::rotary_forward(bf16*, int, int, int, int, int, int, double) {
  no_bf16(*this, "rotary");
}
void Backend::rotary_backward(bf16*, int, int, int, int, int, int, double) {
  no_bf16(*this, "rotary");
}
void Backend::attention_forward(bf16*, float*, const bf16*, std::span<const KVBlock<bf16>>, int,
                                int, int, int, int, DocumentMask) {
  no_bf16(*this, "attention");
}
void Backend::attention_backward(bf16*, std::span<const KVBlock<bf16>>, const bf16*, const bf16*,
                                 const bf16*, const float*, int, int, int, int, int, float*,
                                 DocumentMask) {
  no_bf16(*this, "attention");
}
void Backend::embedding_forward(bf16*, const std::int32_t*, const bf16*, const bf16*, int, int,
                                int, int, int) {
  no_bf16(*this, "embedding");
}
void Backend::embedding_backward(float*, float*, const bf16*, const std::int32_t*, int, int, int,
                                 int, int) {
  no_bf16(*this, "embedding");
}
double Backend::cross_entropy_forward_backward(bf16*, float*, const std::int32_t*, int, int,
                                               double) {
  no_bf16(*this, "cross-entropy");
}
void Backend::adamw_update(float*, bf16*, const float*, float*, float*, std::size_t,
                           const AdamWHyper&) {
  no_bf16(*this, "AdamW");
}

}  // namespace plait::kernels
