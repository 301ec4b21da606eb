#pragma once
// Which tensor has which element type: the one precision policy that the engine (model/), the
// memory model (spec/unit_memory.h, runtime::predicted_memory) and the planner read. bf16 is
// mixed precision as Micikevicius et al. (ICLR 2018) define it for fp16 and Kalamkar et al.
// (arXiv 1905.12322) for bfloat16: fp32 master weights updated by an fp32 optimizer, a bf16
// compute copy of them made from the master after every update, bf16 activations for the
// matrix products and attention, fp32 accumulation inside every kernel. bf16 has fp32's exponent
// range, so no loss scaling is needed (fp16 is refused for that reason: it would need one).
//
// Choices, with why:
// - The residual stream is bf16 (Megatron-LM's default; `--fp32-residual-connection` keeps it
//   fp32 there). Each layer's output is x + f(x) computed in fp32 inside the output projection's
//   GEMM and rounded once, so the stream carries one bf16 rounding per layer, as Megatron's and
//   Hugging Face's bf16 models do; an fp32 stream would cost 2 more bytes per token and hidden
//   unit on every saved layer input and on every stage-to-stage message.
// - Norms compute in fp32 on bf16 inputs and write bf16 outputs; their statistics (mean, rstd)
//   are fp32 (Megatron's fused LayerNorm, HF's LlamaRMSNorm upcasts to fp32).
// - Logits are bf16 (the LM head's GEMM output, as Megatron's and llm.c's CUDA kernels keep
//   them); the cross-entropy computes its softmax and log-sum-exp in fp32 and writes the bf16
//   dlogits in place. The loss is fp32 (the per-token losses) and summed in double.
// - Attention keeps its softmax statistic (the log-sum-exp per query row and head) in fp32.
// - dK/dV: a unit's accumulator is fp32 (later segments' backwards add into it, so one rounding
//   per addition would lose what bf16 cannot hold), from the micro-batch's first B to the
//   unit's own B; at the end of that B, which completes it, it is rounded to a bf16 copy that
//   the unit keeps to its W (the K/V projection's weight gradient) and the fp32 one is freed.
// - Weight gradients accumulate in fp32 over the micro-batches (bf16 operands, fp32 GEMM
//   output); the gradient norm and its clipping are computed on them in double.
// - What stages send each other (activations forward, their gradients backward) is bf16: the
//   tensors the receiving stage computes with, so rounding before the send changes nothing.
// - What data parallelism reduces is a choice (GradReduce, train.grad_reduce; dp_gradient below):
//   fp32 (the default): the fp32 gradients the optimizer reads, reduced in place, exact up to the
//   sum's association, 4 bytes per parameter on the wire. bf16 (mixed precision only): each
//   rank's fp32 gradient rounded to bf16 for the wire, summed pairwise in fp32 with every partial
//   sum rounded to bf16 (comm/bf16_sum.h), the result widened back into the fp32 gradient before
//   the optimizer: 2 bytes per parameter on the wire, a bf16 wire copy of the stage's gradients
//   (comm_buffers) while the reduction is in flight, and an error of one rounding per rank's
//   gradient plus one per partial sum, relative 2^-8 each. Megatron-LM's analogue is
//   `--grad-reduce-in-bf16` (DistributedDataParallelConfig.grad_reduce_in_fp32 false: its
//   megatron/core/distributed/distributed_data_parallel.py makes the gradient buffer the
//   parameter's dtype, so Megatron also accumulates the micro-batches in bf16 and needs no wire
//   copy); plait keeps fp32 accumulation over micro-batches (the policy above) and rounds only
//   for the wire, which costs the transient copy.
#include "plait/core/dtype.h"
#include "plait/spec/unit_memory.h"

namespace plait::spec {

enum class TensorClass {
  compute_weight,       // what the kernels read: the master itself in fp32, its bf16 copy
  master_weight,        // what the optimizer updates and checkpoints store (always fp32)
  weight_gradient,      // accumulated over micro-batches, reduced over data parallelism
  optimizer_moment,     // AdamW's m and v
  activation,           // every saved activation and activation gradient, the residual stream
  kv,                   // a unit's K|V rows
  dkv_accumulator,      // dK/dV while later segments add into it
  dkv_kept,             // a unit's completed dK/dV, from its B to its W
  norm_statistic,       // LayerNorm mean/rstd, RMSNorm rstd
  attention_statistic,  // the log-sum-exp per query row and head
  logits,               // the LM head's output, which becomes dlogits
  loss,                 // per-token losses
  stage_message,        // what a stage sends the next (activations) or the previous (gradients)
  dp_gradient,          // what data parallelism all-reduces or reduce-scatters (fp32 reduce;
                        // dp_gradient_dtype for the GradReduce choice)
};

constexpr DType dtype_of(TensorClass t, Precision p) {
  if (p == Precision::fp32) return DType::f32;
  switch (t) {
    case TensorClass::compute_weight:
    case TensorClass::activation:
    case TensorClass::kv:
    case TensorClass::dkv_kept:
    case TensorClass::logits:
    case TensorClass::stage_message:
      return DType::bf16;
    case TensorClass::master_weight:
    case TensorClass::weight_gradient:
    case TensorClass::optimizer_moment:
    case TensorClass::dkv_accumulator:
    case TensorClass::norm_statistic:
    case TensorClass::attention_statistic:
    case TensorClass::loss:
    case TensorClass::dp_gradient:
      return DType::f32;
  }
  return DType::f32;
}

constexpr std::size_t bytes_of(TensorClass t, Precision p) { return dtype_size(dtype_of(t, p)); }

// What data parallelism reduces (spec: the policy's one reduction choice). bf16 needs mixed
// precision (train.grad_reduce is refused with fp32 weights: nothing else of the step is bf16).
enum class GradReduce { fp32, bf16 };
constexpr const char* grad_reduce_name(GradReduce g) { return g == GradReduce::bf16 ? "bf16" : "fp32"; }

// The element type data parallelism moves for the gradients.
constexpr DType dp_gradient_dtype(Precision p, GradReduce g) {
  return p == Precision::bf16 && g == GradReduce::bf16 ? DType::bf16 : dtype_of(TensorClass::dp_gradient, p);
}
// Bytes per gradient element on the wire (reduce-scatter, all-reduce; the tied embedding's too).
constexpr std::size_t dp_gradient_bytes(Precision p, GradReduce g) { return dtype_size(dp_gradient_dtype(p, g)); }
// Bytes per weight element the weights' all-gathers move (the compute copy the kernels read).
constexpr std::size_t dp_weight_bytes(Precision p) { return bytes_of(TensorClass::compute_weight, p); }

// Whether the engine keeps a separate compute copy of the weights (bf16) beside the fp32 master.
constexpr bool has_compute_copy(Precision p) { return p == Precision::bf16; }

}  // namespace plait::spec
