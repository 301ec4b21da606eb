#pragma once
// Tensor parallelism with sequence parallelism, as ONE table of splits (torchtitan's
// parallelisation plans are the model: a map from each module to ColwiseParallel,
// RowwiseParallel or SequenceParallel). Megatron-LM's scheme: Shoeybi et al., "Megatron-LM"
// (arXiv 1909.08053) for the column/row split of every linear pair and the vocabulary-parallel
// embedding, LM head and cross-entropy; Korthikanti et al., "Reducing Activation Recomputation in
// Large Transformer Models" (arXiv 2205.05198) sec. 4.2.2 for sequence parallelism of the norms,
// dropout and residual stream. The memory model (spec/unit_memory.h: per-rank parameters and
// activations), the simulator (per-GPU work and the TP collectives) and the planner read this
// table, and so does the runtime (model/tensor_parallel.h: each rank lays out its part by
// tensor_shard() and runs the collectives below).
//
// A TP group of t ranks runs every stage part thus, per layer (Korthikanti et al. fig. 5):
//   [SP] norm on the rank's s/t tokens -> all-gather (s tokens) -> column-parallel linear (q/k/v
//   or fc / gate, up: the rank's heads or FFN columns) -> attention or the activation on the
//   rank's heads / columns -> row-parallel linear (proj / o or fc_proj / down: partial sums over
//   the rank's input features) -> reduce-scatter (back to s/t tokens) -> [SP] residual add.
// So F runs two all-gathers and two reduce-scatters per layer; B runs their conjugates (the
// backward of an all-gather is a reduce-scatter and the reverse), two of each again.
//
// The weight gradient of a column-parallel linear, dW = dY^T X, needs X gathered over the whole
// sequence, and that of a row-parallel one needs its output gradient dY gathered (under sequence
// parallelism dY arrives as the rank's slice). plait GATHERS THEM AGAIN in W (Megatron-LM's
// choice with sequence parallelism, Korthikanti et al. sec. 4.2.2: the gathered input is not
// stored) rather than keeping them from F or B to W: activations stay exactly 1/t per rank
// (keeping them would add 4C elements per token and layer, unsplit, to a GPT layer's 16C / t:
// +100% at t = 4, for every unit a zero-bubble schedule defers), and W pays four all-gathers per
// layer (below). A gathered tensor lives in a communication buffer for one linear.
//
// Partial sums travel in fp32: a row-parallel linear's output and a column-parallel one's input
// gradient are fp32 products (bf16 operands, fp32 accumulation), reduce-scattered in fp32 and
// rounded once after the bias and residual are added, as the single process's accumulator does
// (Megatron reduce-scatters bf16 partials instead: one rounding more per rank). The sequence
// slice of a unit is its N = batch x s rows cut into t contiguous blocks of N/t rows (rank i the
// i-th), so a gather is a concatenation; norms and the residual stream are per row and do not
// care which rows a rank holds.
//
// Every parameter tensor is exactly one of:
//   column      rows of the (out, in) weight and its bias split: rank i holds output features
//               [i out/t, (i+1) out/t) of each block (q, k, v of GPT-2's fused c_attn are three
//               blocks: rank i holds its query heads AND its K/V heads);
//   row         columns (input features) split; the output is a partial sum, reduce-scattered;
//   vocabulary  rows of the (V, C) token table / LM head split by vocabulary, V padded to a
//               multiple of 128 t (Megatron-LM --make-vocab-size-divisible-by 128 x TP); the
//               padded rows are zero, their logits masked, and stripped in checkpoints;
//   replicated  every rank holds it whole (norm gains and biases, row-parallel biases added
//               after the reduce-scatter, GPT-2's learned position table). A sequence-parallel
//               one (the norms: sequence_parallel below) computes on the rank's sequence slice,
//               so its gradient is partial (its tokens only) and is all-reduced over the TP
//               group; the others' gradients are taken whole on every rank from the gathered
//               output gradient (a row-parallel bias: the column sums of the gathered dY its
//               weight gradient reads anyway; the position table: the gathered gradient of the
//               embedding's output, which the vocabulary-parallel table gradient reads anyway),
//               so they need no reduction. The global gradient norm counts every replicated
//               tensor once (not t times).
// K/V heads are split, not replicated, so kv_heads must be divisible by t (as Megatron-core
// requires); check_tensor_parallel refuses otherwise.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plait/spec/model_spec.h"

namespace plait::spec {

enum class TensorSplit { column, row, vocabulary, replicated };
std::string_view tensor_split_name(TensorSplit split);  // "column" | "row" | "vocabulary" | "replicated"

// One entry of the table. `name` is a layer tensor's family-local suffix ("attn.c_attn.weight",
// as model::layer_tensor_name takes it) when per_layer, else the tensor's whole name ("wte",
// "lm_head.weight"). `blocks` are the output-feature blocks a column split cuts separately (a
// fused q|k|v has three); their sizes sum to shape(model)[0].
struct TensorSplitRule {
  std::string_view name;
  bool per_layer = true;
  TensorSplit split = TensorSplit::replicated;
  bool sequence_parallel = false;  // computed on the rank's sequence slice (the norms): gradient all-reduced
  std::vector<std::int64_t> (*shape)(const ModelSpec&) = nullptr;  // the whole tensor, (out, in) or (n)
  std::vector<std::int64_t> (*blocks)(const ModelSpec&) = nullptr;  // column only; null: one block
  std::string_view why;  // Megatron's placement, for reports and docs
};

// The family's table: every tensor of a layer (model/parameter_layout.cpp's order), then the
// embedding, position table, final norm and LM head.
std::span<const TensorSplitRule> tensor_parallel_plan(Family family);

// The rule of a tensor by its global name ("h.3.attn.c_attn.weight", "model.norm.weight", "wte");
// throws plait::Error when the table has none (every tensor plait lays out has one: tested).
const TensorSplitRule& tensor_split_rule(const ModelSpec& model, std::string_view tensor_name);

// Throws plait::Error with a one-line reason unless the model splits over t ranks: t >= 1; heads,
// kv_heads ("Megatron-core splits K/V heads over the TP group; plait does not replicate them")
// and ffn_hidden divisible by t.
void check_tensor_parallel(const ModelSpec& model, int t);

// The vocabulary a TP group of t holds: V itself at t = 1 (the single process is the reference:
// nothing padded), else V rounded up to a multiple of 128 t (Megatron-LM's
// _vocab_size_with_padding), so each rank's share is a whole multiple of 128 rows.
std::int64_t padded_vocab(const ModelSpec& model, int t);

// What rank `rank` of t holds of a tensor: along `dim` (0 rows, 1 columns; -1: all of it), the
// [begin, begin + length) ranges (one per block); vocabulary ranges index the padded table (rows
// >= V are padding).
struct TensorShard {
  int dim = -1;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::int64_t numel = 0;  // elements the rank holds
};
TensorShard tensor_shard(const ModelSpec& model, const TensorSplitRule& rule, int t, int rank);

// Parameters one rank of a TP group of t holds for a stage of `layers` layers with the embedding
// and/or the head (the table's shapes, split tensors 1/t, vocabulary ones of the padded table):
// equals ModelSpec::stage_parameters at t = 1.
std::int64_t tensor_parallel_stage_parameters(const ModelSpec& model, int t, int layers, bool embedding, bool head);
// Of those, the replicated ones (every rank of the group holds them whole), and of these the
// sequence-parallel ones (the norms), whose partial gradients are all-reduced over the TP group.
std::int64_t replicated_stage_parameters(const ModelSpec& model, int layers, bool embedding, bool head);
std::int64_t all_reduced_stage_parameters(const ModelSpec& model, int layers, bool embedding, bool head);

// Under sequence parallelism every unit's tokens split evenly over the TP group: throws
// plait::Error naming the first segment whose length t does not divide (with --split flops:<t>,
// the Seq1F1B reference's rounding, as the remedy).
void check_sequence_parallel(const std::vector<std::int64_t>& segment_lengths, int t);

// ---- Time model ----
// Ring collectives over t ranks (Thakur, Rabenseifner and Gropp, "Optimization of Collective
// Communication Operations in MPICH", IJHPCA 2005, sec. 3: ring all-gather (p-1) alpha +
// (p-1)/p n beta; reduce-scatter the same plus the local reductions, neglected here; all-reduce
// as a reduce-scatter then an all-gather), with n the bytes of the whole gathered (or reduced)
// tensor and the bandwidth the collective's BUS bandwidth (NCCL-tests' busBw, which it defines so
// that time = (t-1)/t x bytes / busBw for all-gather and reduce-scatter, 2(t-1)/t for all-reduce:
// nccl-tests doc/PERFORMANCE.md):
//   all-gather, reduce-scatter   (t-1) alpha + (t-1)/t x bytes / bandwidth
//   all-reduce                   2 (t-1) alpha + 2 (t-1)/t x bytes / bandwidth
// alpha is one ring step's latency. 0 at t = 1.
enum class Collective { all_gather, reduce_scatter, all_reduce };
double ring_collective_seconds(Collective collective, double bytes, int t, double latency_seconds,
                               double bandwidth_bytes_per_second);

// The TP collectives one rank runs in one pass of a unit (UnitPass below) of a stage part:
//   per layer      F: 2 all-gathers + 2 reduce-scatters; B: 2 + 2 (the conjugates);
//                  W: 4 all-gathers (the column-parallel inputs and the row-parallel output
//                  gradients gathered again, above);
//   embedding      F: 1 reduce-scatter (the vocabulary-parallel lookup's partial sums into the
//                  sequence-parallel region); W: 1 all-gather (the output gradient over the whole
//                  sequence for the table's rows and the position table);
//   head           F: 1 all-gather (the final norm's output for the vocabulary-parallel LM head)
//                  + 3 all-reduces of one fp32 per token (the vocabulary-parallel cross-entropy's
//                  max, sum of exponentials and target logit, Megatron-LM's
//                  _VocabParallelCrossEntropy); B: 1 reduce-scatter (the head's input gradient);
//                  W: 1 all-gather (its input again, for dW).
// The gathered tensors are tokens x hidden activation elements, the reduce-scattered ones
// tokens x hidden fp32 partial sums; a fused backward (BW) runs B's and W's. Nothing is overlapped with compute in this model (Megatron overlaps the W re-gather
// with the input-gradient GEMM; plait's model charges it, an upper bound).
enum class UnitPass { forward, backward_input, backward_weight };
struct TpCollectives {
  int all_gathers = 0, reduce_scatters = 0;  // each of tokens x hidden activation elements
  int all_reduces = 0;                       // each of tokens fp32 values
};
TpCollectives tp_collectives(UnitPass pass, int layers, bool embedding, bool head);
// Their seconds for a unit of `tokens` (micro-batch size x segment length) on a TP group of t
// joined by a link of that latency per ring step and bus bandwidth.
double tp_collective_seconds(const TpCollectives& collectives, double tokens, int hidden, double element_bytes, int t,
                             double latency_seconds, double bandwidth_bytes_per_second);

}  // namespace plait::spec
