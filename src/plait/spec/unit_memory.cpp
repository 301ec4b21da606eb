#include "plait/spec/unit_memory.h"

#include <algorithm>
#include <cstdint>

namespace plait::spec {

std::string_view precision_name(Precision precision) {
  return precision == Precision::fp32 ? "fp32" : "bf16";
}

ParameterBytes parameter_bytes(Precision precision) {
  if (precision == Precision::fp32) return {4, 4, 8};
  return {2, 4, 12};
}

std::size_t attention_workspace_elements(int s, int e, int threads) {
  return static_cast<std::size_t>(threads) * std::min(s, kAttentionQueryBlock) * e;
}

UnitMemory unit_memory(const ModelSpec& model, const StagePart& part, int batch,
                       const Segment& segment, Precision precision, int threads) {
  using i64 = std::int64_t;
  const bool fp32 = precision == Precision::fp32;
  // Element sizes (unit_memory.h): activations and their gradients, K/V, statistics (norm
  // means and rstds, log-sum-exp), logits, dK/dV accumulators, token ids.
  const i64 act = fp32 ? 4 : 2, kvb = act, stat = 4, logit = 4, dkvb = 4, tok = 4;
  const i64 s = segment.length, e = segment.end();
  const i64 n = i64{batch} * s;
  const i64 C = model.hidden, K = model.kv_dim(), F = model.ffn_hidden, V = model.vocab;
  const i64 H = model.heads;
  const i64 m1 = model.mlp_matrices() - 1;  // MLP pre-activation widths in units of F
  const bool llama = model.family == Family::llama;
  const i64 L = part.layers;
  const i64 emb = part.embedding ? 1 : 0, head = part.head ? 1 : 0;

  // One layer, in bytes for the unit.
  const i64 norm_stats = n * stat * (llama ? 2 : 4);
  const i64 keep_for_w = n * act * (5 * C + F) + norm_stats;
  const i64 attention_state = fp32 ? i64{batch} * H * s * e * 4 : n * H * stat;
  const i64 free_at_b = n * act * (C + m1 * F) + attention_state;  // q, MLP pre-act., attention
  const i64 kv = n * 2 * K * kvb;
  const i64 dkv = n * 2 * K * dkvb;
  const i64 b_outputs = n * act * (m1 * F + 4 * C);  // kept to W, besides dx_out
  const i64 workspace = fp32 ? static_cast<i64>(attention_workspace_elements(
                                   segment.length, segment.end(), threads)) * 4
                             : n * C * 4;
  const i64 b_scratch = n * act * (C + (llama ? F : 0)) + workspace;
  const i64 nc = n * C * act;
  // Head: x_final, the final norm's output, its statistics, the logits; d_final_norm in B.
  const i64 head_forward = 2 * nc + n * stat * (llama ? 1 : 2) + n * V * logit;

  UnitMemory u;
  u.forward_activations = static_cast<std::size_t>(L * (keep_for_w + free_at_b) + emb * n * tok +
                                                   head * head_forward);
  u.forward_kv = static_cast<std::size_t>(L * kv);
  u.forward_peak = u.forward_activations + u.forward_kv + static_cast<std::size_t>(head * n * 4);
  u.dkv = static_cast<std::size_t>(L * dkv);
  u.backward_freed = static_cast<std::size_t>(L * free_at_b);
  u.backward_kept = static_cast<std::size_t>(L * (nc + b_outputs) + emb * nc + head * nc);
  u.recompute_kept = static_cast<std::size_t>(L * nc + emb * n * tok + head * head_forward);
  u.recompute_layer = static_cast<std::size_t>(L > 0 ? keep_for_w + free_at_b : 0);

  // Walk B (and the fused B+W) from the top, in the engine's order: the gradient buffer of the
  // stage output (or the head input), the head, then each layer's destination buffer, its B
  // outputs + scratch (the peak), its frees. The level is relative to B's start and goes
  // negative once B frees more than it allocates.
  auto walk = [&](bool fused) {
    i64 level = (L > 0 || emb) ? nc : 0;
    i64 peak = level;
    if (head) {
      level += nc;  // d_final_norm
      peak = std::max(peak, level);
      if (fused) level -= head_forward + nc;  // the head's W frees its state
    }
    for (i64 i = L; i-- > 0;) {
      level += (i > 0 || emb) ? nc : 0;  // dL/d(layer input)
      level += b_outputs + b_scratch;
      peak = std::max(peak, level);
      level -= b_scratch + free_at_b + kv;
      if (fused) level -= keep_for_w + nc + b_outputs + dkv;  // W frees the rest of the layer
    }
    return static_cast<std::size_t>(peak);
  };
  u.backward_peak = walk(false);
  u.fused_peak = walk(true);
  return u;
}

}  // namespace plait::spec
