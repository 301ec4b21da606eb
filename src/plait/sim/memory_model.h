#pragma once
// Memory of a pipeline rank: what stays (parameters, gradients, optimizer state of the stages it
// holds) and what comes and goes with the schedule (activations of in-flight units and their K/V
// prefixes). Every coefficient is a field, so it can be matched to the bytes the engine really
// allocates.
//
// Static, per parameter (defaults: bf16 mixed precision with AdamW; ZeRO paper, Rajbhandari et
// al. arXiv 1910.02054 sec. 3.1, with Megatron's fp32 gradient buffer): 2 bytes weights,
// 4 bytes gradients, 12 bytes optimizer state (fp32 master copy + first and second moment).
// Parameters of a layer: 12H^2 + 13H; stage 0 adds the token and position embeddings
// (V + max_seq) * H; the last stage adds the final norm 2H and its own LM head V * H.
//
// Activations of one unit (micro-batch size b, segment of length s starting at `start`, on a
// virtual stage with n layers), held from the start of its F:
//   b * s * n * (activation_per_token_layer * H + attention_score_bytes * heads * (start + s))
//   + on the last stage b * s * V * logits_bytes
// (Korthikanti et al., arXiv 2205.05198 sec. 4.1: s*b*h*(34 + 5*a*s/h) bytes per layer; the 5
// bytes per attention score vanish with FlashAttention, plait's default.) When B ends, all but
// weight_grad_held_per_token_layer * H per token and layer is freed (what W still needs: the
// inputs of the four linear layers, 7H values, and the gradients at their outputs, 9H values,
// in bf16: 32H bytes); the logits stay too (they become dlogits for the LM head's W); W or BW
// frees the rest.
// K/V prefix: a segment's attention keeps the keys and values of the whole prefix for its
// backward, b * start * n * kv_per_token_layer * H bytes (K and V in bf16: 4H), from its F until
// its B (or BW) ends.
#include <cstdint>
#include <vector>

#include "plait/schedule/model_shape.h"
#include "plait/schedule/sequence_partition.h"

namespace plait::sim {

struct MemoryCoefficients {
  double parameter_bytes = 2;
  double gradient_bytes = 4;
  double optimizer_bytes = 12;
  double activation_per_token_layer = 34;        // x H bytes
  double attention_score_bytes = 0;              // per (head, query, key); 5 without FlashAttention
  double logits_bytes = 4;                       // per (token, vocabulary entry), head stage
  double weight_grad_held_per_token_layer = 32;  // x H bytes, from B to W
  double kv_per_token_layer = 4;                 // x H bytes of prefix, from F to B
  double head_per_token = 0;                     // x H bytes per token on the head stage besides
                                                 // the logits (plait's fp32 engine: 2H floats)
};

struct StaticMemory {
  std::int64_t parameter_count = 0;
  double parameters = 0, gradients = 0, optimizer = 0;
  double total() const { return parameters + gradients + optimizer; }
};

class MemoryModel {
 public:
  MemoryModel(const schedule::ModelShape& shape, std::vector<int> vstage_layers,
              const schedule::SequencePartition& partition, int microbatch_size,
              const MemoryCoefficients& coefficients);

  int num_segments() const { return segments_; }
  // Bytes a unit allocates when its F starts.
  double activation_bytes(std::int32_t vstage, std::int32_t segment) const { return unit(vstage, segment).activation; }
  // Bytes still held between the end of B and the end of W.
  double held_for_weight_bytes(std::int32_t vstage, std::int32_t segment) const { return unit(vstage, segment).held_for_w; }
  // K/V prefix bytes, from F start to B end.
  double kv_prefix_bytes(std::int32_t vstage, std::int32_t segment) const { return unit(vstage, segment).kv_prefix; }
  // The unit's share of a micro-batch's tokens: s / S.
  double token_share(std::int32_t segment) const { return token_share_[segment]; }

  std::int64_t parameter_count(std::int32_t vstage) const { return parameters_[vstage]; }
  StaticMemory static_memory(const std::vector<std::int32_t>& vstages) const;
  const MemoryCoefficients& coefficients() const { return coefficients_; }

 private:
  struct Unit {
    double activation = 0, held_for_w = 0, kv_prefix = 0;
  };
  const Unit& unit(std::int32_t vstage, std::int32_t segment) const {
    return units_[static_cast<std::size_t>(vstage) * segments_ + segment];
  }
  int segments_;
  MemoryCoefficients coefficients_;
  std::vector<Unit> units_;
  std::vector<double> token_share_;
  std::vector<std::int64_t> parameters_;
};

}  // namespace plait::sim
