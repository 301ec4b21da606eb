#include "plait/plan/memory_policy.h"

#include <algorithm>

namespace plait::plan {

namespace {
constexpr double kGiB = 1024.0 * 1024 * 1024;
}

sim::MemoryCoefficients MemoryPolicy::coefficients() const {
  sim::MemoryCoefficients c;  // the simulator's defaults are mixed16 without recomputation
  if (precision == Precision::fp32) {
    c.parameter_bytes = 4;
    c.gradient_bytes = 4;
    c.optimizer_bytes = 8;
    c.activation_per_token_layer = 64;
    c.attention_score_bytes = 4;
    c.logits_bytes = 4;
    c.weight_grad_held_per_token_layer = 80;
    c.kv_per_token_layer = 0;  // each unit's own K/V is in its activations
    c.head_per_token = 8;
  } else if (recompute) {
    c.activation_per_token_layer = 2;
    c.attention_score_bytes = 0;
    c.kv_per_token_layer = 4;
  }
  return c;
}

double MemoryPolicy::replicated_bytes_per_parameter() const {
  const sim::MemoryCoefficients c = coefficients();
  return c.parameter_bytes + c.gradient_bytes;
}

double MemoryPolicy::optimizer_bytes_per_parameter() const { return coefficients().optimizer_bytes; }

double MemoryPolicy::static_bytes(std::int64_t parameters, int group_size) const {
  const double p = static_cast<double>(parameters);
  const double optimizer = optimizer_bytes_per_parameter() * p / (shards_optimizer() ? group_size : 1);
  return replicated_bytes_per_parameter() * p + optimizer;
}

double MemoryPolicy::reserve_bytes(double capacity) const {
  return precision == Precision::mixed16 ? 2 * kGiB : 0.10 * capacity;
}

double MemoryPolicy::sync_bytes_per_parameter() const {
  return precision == Precision::mixed16 ? 4.0 + 2.0 : 4.0 + 4.0;
}

double MemoryPolicy::working_bytes(const schedule::ModelShape& shape, int microbatch_size, std::int64_t unit_tokens,
                                   bool head) const {
  const double tokens = static_cast<double>(microbatch_size) * static_cast<double>(unit_tokens);
  const double H = shape.hidden, V = shape.vocab;
  if (precision == Precision::fp32) {
    const double keys = static_cast<double>(shape.max_seq);
    const double workspace = std::min<double>(static_cast<double>(unit_tokens), 128.0) * keys;
    return 4.0 * (tokens * (11.0 * H + (head ? V + 2.0 * H : 0.0)) + workspace + 2.0 * tokens * H);
  }
  if (!recompute) return 0.0;
  return tokens * (34.0 * H + (head ? 4.0 * V : 0.0));
}

std::string MemoryPolicy::describe() const {
  if (precision == Precision::fp32) {
    return "fp32 (plait's CPU engine): 4 B weights + 4 B gradients + 8 B AdamW state per parameter on "
           "every rank; activations 64H B per token and layer; 10% reserve";
  }
  return std::string("mixed16: 2 B weights + 4 B fp32 gradients per parameter, 12 B optimizer state "
                     "sharded over the stage's data-parallel group; ") +
         (recompute ? "full recomputation (2H B per token and layer kept)" : "activations 34H B per token and layer") +
         "; 2 GiB reserve";
}

}  // namespace plait::plan
