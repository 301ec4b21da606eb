#include "plait/sim/memory_model.h"

namespace plait::sim {

MemoryModel::MemoryModel(const schedule::ModelShape& shape, std::vector<int> vstage_layers,
                         const schedule::SequencePartition& partition, int microbatch_size,
                         const MemoryCoefficients& coefficients)
    : segments_(static_cast<int>(partition.lengths.size())), coefficients_(coefficients) {
  const int vstages = static_cast<int>(vstage_layers.size());
  const double H = shape.hidden, b = microbatch_size;
  const MemoryCoefficients& c = coefficients;
  units_.resize(static_cast<std::size_t>(vstages) * segments_);
  std::int64_t total_tokens = 0;
  for (std::int64_t len : partition.lengths) total_tokens += len;
  std::int64_t start = 0;
  for (int seg = 0; seg < segments_; ++seg) {
    const double s = static_cast<double>(partition.lengths[seg]);
    token_share_.push_back(s / static_cast<double>(total_tokens));
    for (int v = 0; v < vstages; ++v) {
      const double n = vstage_layers[v];
      Unit& u = units_[static_cast<std::size_t>(v) * segments_ + seg];
      u.activation = b * s * n *
                     (c.activation_per_token_layer * H +
                      c.attention_score_bytes * shape.heads * (static_cast<double>(start) + s));
      u.held_for_w = b * s * n * c.weight_grad_held_per_token_layer * H;
      if (v == vstages - 1) {
        const double logits = b * s * (shape.vocab * c.logits_bytes + H * c.head_per_token);
        u.activation += logits;
        u.held_for_w += logits;
      }
      u.kv_prefix = b * static_cast<double>(start) * n * c.kv_per_token_layer * H;
    }
    start += partition.lengths[seg];
  }
  const std::int64_t h = shape.hidden;
  const std::int64_t per_layer = 12 * h * h + 13 * h;
  for (int v = 0; v < vstages; ++v) {
    std::int64_t p = per_layer * vstage_layers[v];
    if (v == 0) p += (std::int64_t{shape.vocab} + shape.max_seq) * h;
    if (v == vstages - 1) p += 2 * h + std::int64_t{shape.vocab} * h;
    parameters_.push_back(p);
  }
}

StaticMemory MemoryModel::static_memory(const std::vector<std::int32_t>& vstages) const {
  StaticMemory m;
  for (std::int32_t v : vstages) m.parameter_count += parameters_[v];
  const double n = static_cast<double>(m.parameter_count);
  m.parameters = n * coefficients_.parameter_bytes;
  m.gradients = n * coefficients_.gradient_bytes;
  m.optimizer = n * coefficients_.optimizer_bytes;
  return m;
}

}  // namespace plait::sim
