#include "plait/runtime/engine_memory_coefficients.h"

#include "plait/model/unit_memory.h"

namespace plait::runtime {

sim::MemoryCoefficients engine_memory_coefficients(const model::GPTConfig& m) {
  // One layer, one sample, a one-token segment at position 0 and at position 1: the difference
  // is one more visible key per head, which isolates the attention-probability term.
  const model::StageSpec layer{0, 1, false, false};
  const model::UnitMemory at0 = model::unit_memory_bytes(m, layer, 1, {0, 0, 1}, 1);
  const model::UnitMemory at1 = model::unit_memory_bytes(m, layer, 1, {1, 1, 1}, 1);
  const double C = m.hidden, H = m.heads;
  sim::MemoryCoefficients c;
  c.attention_score_bytes = static_cast<double>(at1.forward_activations - at0.forward_activations) / H;
  const double forward_linear = static_cast<double>(at0.forward_activations) - c.attention_score_bytes * H;
  c.activation_per_token_layer = (forward_linear + static_cast<double>(at0.forward_kv)) / C;
  c.weight_grad_held_per_token_layer =
      static_cast<double>(at0.activations_after_b() + at0.dkv) / C;
  c.kv_per_token_layer = 0;
  const model::StageSpec head{m.layers, m.layers, false, true};
  const model::UnitMemory h = model::unit_memory_bytes(m, head, 1, {0, 0, 1}, 1);
  c.logits_bytes = static_cast<double>(h.forward_activations) / m.vocab;
  c.parameter_bytes = 4;
  c.gradient_bytes = 4;
  c.optimizer_bytes = 8;
  return c;
}

}  // namespace plait::runtime
