#include "plait/model/unit_memory.h"

#include <algorithm>
#include <cstdint>

#include "plait/kernels/attention.h"

namespace plait::model {

UnitMemory unit_memory_bytes(const GPTConfig& config, const StageSpec& spec, int batch,
                             const Segment& segment, int threads) {
  // Everything in floats first; mirrors the allocation order of StageModel and TransformerBlock.
  const std::size_t s = static_cast<std::size_t>(segment.length);
  const std::size_t n = static_cast<std::size_t>(batch) * s;
  const std::size_t c = static_cast<std::size_t>(config.hidden);
  const std::size_t nc = n * c;
  const std::size_t e = static_cast<std::size_t>(segment.end());
  const std::size_t p = static_cast<std::size_t>(batch) * config.heads * s * e;
  const std::size_t ws = kernels::attention_backward_workspace(segment.length, segment.end(), threads);
  const std::size_t nv = n * static_cast<std::size_t>(config.vocab);
  const std::size_t layers = static_cast<std::size_t>(spec.layer_count());
  const std::size_t emb = spec.has_embedding ? 1 : 0;
  const std::size_t head = spec.has_head ? 1 : 0;

  const std::size_t layer_forward = 14 * nc + 4 * n + p;
  const std::size_t head_forward = 2 * nc + 2 * n + nv;
  UnitMemory m;
  m.forward_activations = layers * layer_forward + emb * n + head * head_forward;
  m.forward_kv = layers * 2 * nc;
  m.forward_peak = m.forward_activations + m.forward_kv + head * n;
  m.dkv = layers * 2 * nc;
  m.backward_freed = layers * (5 * nc + p);
  m.backward_kept = nc * (9 * layers + emb + head);

  // Walk B (and the fused B+W) from the top: the gradient buffer of the stage output, the head,
  // then each layer's destination buffer, its B outputs + scratch (peak), its frees. The level
  // is relative to B's start and goes negative once B frees more than it allocates.
  auto walk = [&](bool fused) {
    using i64 = std::int64_t;
    const i64 NC = static_cast<i64>(nc), N = static_cast<i64>(n);
    i64 level = (layers > 0 || emb) ? NC : 0;  // dL/d(stage output) or head input
    i64 peak = level;
    if (head) {
      level += NC;  // d_lnf
      peak = std::max(peak, level);
      if (fused) level -= 3 * NC + 2 * N + static_cast<i64>(nv);  // head W frees its state
    }
    for (std::size_t i = layers; i-- > 0;) {
      level += (i > 0 || emb) ? NC : 0;         // dL/d(layer input)
      level += 9 * NC + static_cast<i64>(ws);  // d_fc_pre, d_ln2, dx_mid, dq, d_ln1, d_atty, ws
      peak = std::max(peak, level);
      level -= 8 * NC + static_cast<i64>(ws + p);  // d_atty, ws, fc_pre, q, probs, K/V
      if (fused) level -= 20 * NC + 4 * N;         // W frees the rest of the layer and its dK/dV
    }
    return static_cast<std::size_t>(peak);
  };
  m.backward_peak = walk(false);
  m.fused_peak = walk(true);

  constexpr std::size_t kFloat = sizeof(float);
  m.forward_activations *= kFloat;
  m.forward_kv *= kFloat;
  m.forward_peak *= kFloat;
  m.dkv *= kFloat;
  m.backward_freed *= kFloat;
  m.backward_kept *= kFloat;
  m.backward_peak *= kFloat;
  m.fused_peak *= kFloat;
  return m;
}

}  // namespace plait::model
