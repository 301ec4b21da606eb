#pragma once
// The bytes one unit (micro-batch, segment) holds on a stage, by memory category and lifetime,
// as functions of the model description: the one source for the engine's memory accounting
// (tests/model/memory_test.cpp checks the tracker against it at every step), the simulator's
// memory model and the planner. Derivation: docs/engine.md, "Memory of a unit".
//
// A layer saves, per token (N = batch * s rows; C hidden, K = kv_dim, F = ffn_hidden,
// m = mlp_matrices: 2 for GELU, 3 for SwiGLU):
//   kept from F to W    x_in, norm1 out, attention out, x_mid, norm2 out (5C), the MLP's
//                       activation (F), norm statistics (gpt2: mean + rstd twice, llama: rstd
//                       twice)
//   from F to end of B  q (C), the MLP's pre-activation ((m-1) F: fc_pre, or gate|up), the
//                       attention state (FlashAttention's fp32 log-sum-exp, H per token, in
//                       both precisions: no S x S probabilities); K/V (2K, kv_cache)
//   from B to W         dx_out, the MLP pre-activation's gradient ((m-1) F), d_norm2, dx_mid,
//                       dq, d_norm1 (5C + (m-1) F)
//   during B only       d_attention_out (C), [llama] d of the SwiGLU output (F), the attention
//                       backward's workspace (the CPU kernel's tile scratch per thread,
//                       spec/attention_tiles.h)
//   dK/dV (2K, kv_cache) from the micro-batch's first B to the unit's W (bf16: the fp32
//                       accumulator to the unit's B, which rounds it into a bf16 copy kept to W).
// The embedding stage keeps the tokens (int32) and dL/d(embedding) (C); the head stage keeps
// x_final, the final norm's output and statistics, the logits (which become dlogits) and
// d_final_norm (C), and allocates the per-token losses inside F.
//
// Recomputation (StagePart::recompute_layers = r: the stage's first r layers; spec/recompute.h):
// a recomputed layer's F computes everything as usual, then frees all of it but x_in and K/V;
// just before that layer's B, B rebuilds it ("rebuild": the kept-to-W and freed-at-B sets of
// the table above minus x_in, i.e. everything F saved but the input) from x_in and the K/V,
// running neither the K/V projection (the kept K/V are its result) nor the output projection
// (the next layer kept its input). K/V is KEPT, not recomputed, because the later segments of
// the micro-batch attend to it: their F runs before this unit's B, and their B adds dK/dV into
// this unit's accumulators. From B on the recomputed layer holds exactly what a layer that was
// not recomputed holds (what W needs), so a split B/W unit saves memory only between its F
// and its B.
//
// Precisions (element bytes): fp32 (plait's CPU engine) 4 everywhere; bf16 (mixed precision:
// the GPU backend's layout) 2 for activations, K/V and their gradients, 4 for statistics,
// logits and dK/dV accumulators, and the GPU's attention backward workspace: one fp32 value per
// query row and head, N*H: D = rowsum(dO * O), FlashAttention-2 Algorithm 2 line 4, as
// kernels/cuda/attention.h allocates it (dQ has its own kernel and no fp32 accumulator).
//
// Tensor parallelism with sequence parallelism (StagePart::tensor_parallel = t > 1; Korthikanti
// et al., arXiv 2205.05198, sec. 4.2.2 and Table 2: with sequence parallelism every activation of
// a layer is divided by t): each rank holds 1/t of every tensor above, sequence-sharded (x_in, the
// norms' outputs and statistics, x_mid, their gradients: s/t tokens of C) or head- and
// FFN-sharded (q, K/V, the attention output and state, the MLP's: all s tokens of 1/t of the
// width), so the segment's length must be divisible by t (check_sequence_parallel). Two
// exceptions: the token ids (every rank of the vocabulary-parallel embedding looks up all s) and
// the logits (all s tokens of the rank's V'/t vocabulary, V' = padded_vocab). The CPU engine's
// fp32 attention workspace (per thread, not per head) is not divided. Besides, each TP action
// uses a communication buffer for the sequence-gathered input of a column-parallel linear and the
// full-sequence partial sums of a row-parallel one before their reduce-scatter
// (UnitMemory::communication: at most one at a time, the larger being the N x C fp32 partial
// sums; the W gradient gathers its inputs again into one rather than keeping them,
// spec/tensor_parallel_plan.h).
#include <cstddef>

#include "plait/spec/attention_tiles.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::spec {

enum class Precision { fp32, bf16 };
std::string_view precision_name(Precision precision);  // "fp32" | "bf16"

// Bytes per parameter by category: fp32 weights 4, gradients 4, AdamW moments 8; bf16 mixed
// precision weights 2, fp32 gradients 4, fp32 master copy + moments 12 (ZeRO, Rajbhandari et
// al. arXiv 1910.02054 sec. 3.1).
struct ParameterBytes {
  double parameters = 0, gradients = 0, optimizer = 0;
  double total() const { return parameters + gradients + optimizer; }
};
ParameterBytes parameter_bytes(Precision precision);

// What part of the model a stage holds, as far as memory is concerned.
struct StagePart {
  int layers = 0;
  bool embedding = false;
  bool head = false;
  int recompute_layers = 0;  // the first this many layers recompute their forward in B
  // The stage's tensor-parallel degree t (spec/tensor_parallel_plan.h): the bytes are one rank's.
  int tensor_parallel = 1;
};

struct UnitMemory {
  // Activations F allocates and leaves for B/W (with recomputation: the recomputed layers' inputs
  // and the other layers' whole state).
  std::size_t forward_activations = 0;
  // This unit's K/V (kv_cache), from its F to the end of its B.
  std::size_t forward_kv = 0;
  // F's peak over the bytes allocated before it (all categories): the two above + [head] the
  // per-token losses, freed before F returns; with recomputation, the largest of that and the
  // level inside a recomputed layer's F, before it frees its state.
  std::size_t forward_peak = 0;
  // This unit's dK/dV accumulator (kv_cache), allocated zeroed for EVERY unit of the
  // micro-batch by the micro-batch's first B (the last segment's), freed by the unit's W.
  std::size_t dkv = 0;
  // The dK/dV the unit holds from its B to its W: fp32, the accumulator itself (= dkv); bf16,
  // the accumulator rounded to bf16 by the unit's B, which frees the fp32 one
  // (spec/precision_policy.h). So B changes the K/V category by dkv_kept - dkv - forward_kv.
  std::size_t dkv_kept = 0;
  // Activations B frees (of what F left) and allocates to keep until W (a recomputed layer's
  // rebuilt state that W needs, besides B's outputs).
  std::size_t backward_freed = 0;
  std::size_t backward_kept = 0;
  // B's peak over the bytes allocated at its start, after the micro-batch's dK/dV accumulators
  // (on its first B, add the sum of its units' dkv).
  std::size_t backward_peak = 0;
  // The same for the fused backward (B+W), which ends with all of the unit's memory released.
  std::size_t fused_peak = 0;
  // The bytes B allocates to rebuild one recomputed layer (the rebuild above; the planner's
  // working set of a recomputing stage).
  std::size_t recompute_layer = 0;
  // The activations category's own peaks over the same starting points as forward_peak,
  // backward_peak and fused_peak (the memory tracker keeps a peak per category).
  std::size_t forward_peak_activations = 0;
  std::size_t backward_peak_activations = 0;
  std::size_t fused_peak_activations = 0;
  // The K/V category's peaks over its level at the start of B and B+W (F's is forward_kv). In
  // fp32 B only frees K/V (0); in bf16 a layer's B rounds its completed dK/dV into the bf16 copy
  // it keeps before freeing the fp32 accumulator, so the first layer B reaches holds both for a
  // moment: one layer's dK/dV copy above the start.
  std::size_t backward_peak_kv = 0;
  std::size_t fused_peak_kv = 0;
  // Tensor parallelism: the communication buffer an action of this unit holds at most, tokens x
  // C fp32 (a row-parallel output's partial sums, or a column-parallel input gradient's); 0 at
  // t = 1.
  std::size_t communication = 0;

  // Activations held between the unit's B and its W.
  std::size_t activations_after_b() const {
    return forward_activations - backward_freed + backward_kept;
  }
};

UnitMemory unit_memory(const ModelSpec& model, const StagePart& part, int batch,
                       const Segment& segment, Precision precision, int threads);

}  // namespace plait::spec
