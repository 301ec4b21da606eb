#include "plait/spec/unit_memory.h"

#include "plait/spec/precision_policy.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "plait/core/error.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::spec {

std::string_view precision_name(Precision precision) {
  return precision == Precision::fp32 ? "fp32" : "bf16";
}

ParameterBytes parameter_bytes(Precision precision) {
  if (precision == Precision::fp32) return {4, 4, 8};
  return {2, 4, 12};
}

UnitMemory unit_memory(const ModelSpec& model, const StagePart& part, int batch,
                       const Segment& segment, Precision precision, int threads) {
  using i64 = std::int64_t;
  // Element sizes (unit_memory.h): activations and their gradients, K/V, statistics (norm
  // means and rstds, log-sum-exp), logits, dK/dV accumulators, token ids.
  using TC = TensorClass;
  const i64 act = bytes_of(TC::activation, precision), kvb = bytes_of(TC::kv, precision),
            stat = bytes_of(TC::norm_statistic, precision), logit = bytes_of(TC::logits, precision),
            dkvb = bytes_of(TC::dkv_accumulator, precision), tok = 4;
  const bool keeps_copy = dtype_of(TC::dkv_kept, precision) != dtype_of(TC::dkv_accumulator, precision);
  const i64 s = segment.length;
  const i64 n = i64{batch} * s;
  // Tensor parallelism (unit_memory.h): t divides the segment's tokens and every split width, so
  // each 1/t tensor is exactly nt rows of its whole width (sequence-sharded) or n rows of 1/t of
  // it (head- or FFN-sharded).
  const i64 tp = std::max(1, part.tensor_parallel);
  if (tp > 1 && s % tp != 0) {
    throw Error("unit memory: a segment of " + std::to_string(s) + " tokens does not split over the tensor-parallel "
                "size " + std::to_string(tp));
  }
  const i64 nt = n / tp;
  const i64 C = model.hidden, K = model.kv_dim(), F = model.ffn_hidden, V = padded_vocab(model, static_cast<int>(tp)) / tp;
  const i64 H = model.heads;
  const i64 m1 = model.mlp_matrices() - 1;  // MLP pre-activation widths in units of F
  const bool llama = model.family == Family::llama;
  const i64 L = part.layers;
  const i64 emb = part.embedding ? 1 : 0, head = part.head ? 1 : 0;

  // One layer, in bytes for the unit.
  const i64 norm_stats = nt * stat * (llama ? 2 : 4);
  const i64 keep_for_w = nt * act * (5 * C + F) + norm_stats;
  const i64 attention_state = nt * H * stat;  // the log-sum-exp of every query row and head
  const i64 free_at_b = nt * act * (C + m1 * F) + attention_state;  // q, MLP pre-act., attention
  const i64 kv = nt * 2 * K * kvb;
  const i64 dkv = nt * 2 * K * dkvb;
  const i64 dkv_kept = keeps_copy ? nt * 2 * K * bytes_of(TC::dkv_kept, precision) : dkv;
  const i64 b_outputs = nt * act * (m1 * F + 4 * C);  // kept to W, besides dx_out
  // The CPU attention backward's fp32 tile scratch per thread (spec/attention_tiles.h), whatever
  // the activations' type and the TP degree.
  const i64 workspace = static_cast<i64>(attention_workspace_elements(model.head_dim(), threads)) * 4;
  const i64 b_scratch = nt * act * (C + (llama ? F : 0)) + workspace;
  const i64 nc = nt * C * act;
  // Head: x_final, the final norm's output, its statistics, the logits (all n tokens of the
  // rank's vocabulary share V); d_final_norm in B.
  const i64 head_forward = 2 * nc + nt * stat * (llama ? 1 : 2) + n * V * logit;

  const i64 r = std::clamp<i64>(part.recompute_layers, 0, L);
  const i64 rebuild = keep_for_w - nc + free_at_b;  // a layer's state besides its input

  UnitMemory u;
  u.forward_kv = static_cast<std::size_t>(L * kv);
  u.dkv = static_cast<std::size_t>(L * dkv);
  u.dkv_kept = static_cast<std::size_t>(L * dkv_kept);
  u.backward_freed = static_cast<std::size_t>((L - r) * free_at_b);
  u.backward_kept = static_cast<std::size_t>(L * (nc + b_outputs) + r * (keep_for_w - nc) +
                                             emb * nc + head * nc);
  u.recompute_layer = static_cast<std::size_t>(rebuild);
  // The largest communication buffer an action holds: the fp32 partial sums of a row-parallel
  // output or a column-parallel input gradient, N x C (a gathered input, N x C activations, is
  // released before those are taken).
  u.communication = tp > 1 ? static_cast<std::size_t>(n * model.hidden * 4) : 0;

  // The engine's allocations in order (model/stage_model.cpp), as two levels relative to the
  // call's start, activations and K/V, with the peaks of the first and of the sum.
  struct Walk {
    i64 act = 0, kv = 0, peak_act = 0, peak_kv = 0, peak_total = 0;
    void add(i64 a, i64 k = 0) {
      act += a;
      kv += k;
      peak_act = std::max(peak_act, act);
      peak_kv = std::max(peak_kv, kv);
      peak_total = std::max(peak_total, act + kv);
    }
  };
  // F: the first layer's input (or the head's), the token ids, then per layer the buffer of the
  // next input and the layer's state + K/V (a recomputed layer frees its state again), then the
  // head's state and the per-token losses, which F frees before it returns.
  Walk f;
  f.add((L > 0 || head) ? nc : 0);
  f.add(emb * n * tok);
  for (i64 i = 0; i < L; ++i) {
    f.add((i + 1 < L || head) ? nc : 0);
    f.add(rebuild, kv);
    if (i < r) f.add(-rebuild);
  }
  if (head) {
    f.add(head_forward - nc + n * 4);  // x_final came as the last input; + losses
    f.add(-n * 4);
  }
  u.forward_activations = static_cast<std::size_t>(f.act);
  u.forward_peak = static_cast<std::size_t>(f.peak_total);
  u.forward_peak_activations = static_cast<std::size_t>(f.peak_act);

  // B (and the fused B+W) from the top: the gradient buffer of the stage output (or the head
  // input), the head, then per layer its destination buffer, [recomputed] its rebuilt state,
  // its B outputs + scratch (the layer's peak), its frees. The levels go negative once B frees
  // more than it allocates.
  auto walk = [&](bool fused) {
    Walk b;
    b.add((L > 0 || emb) ? nc : 0);
    if (head) {
      b.add(nc);  // d_final_norm
      if (fused) b.add(-(head_forward + nc));  // the head's W frees its state
    }
    for (i64 i = L; i-- > 0;) {
      b.add((i > 0 || emb) ? nc : 0);  // dL/d(layer input)
      if (i < r) b.add(rebuild);
      b.add(b_outputs + b_scratch);
      if (keeps_copy) {  // the completed accumulator rounded to its bf16 copy, then freed
        b.add(0, dkv_kept);
        b.add(0, -dkv);
      }
      b.add(-(b_scratch + free_at_b), -kv);
      if (fused) b.add(-(keep_for_w + nc + b_outputs), -dkv_kept);  // W frees the rest of the layer
    }
    return b;
  };
  const Walk split = walk(false), fused = walk(true);
  u.backward_peak = static_cast<std::size_t>(split.peak_total);
  u.backward_peak_activations = static_cast<std::size_t>(split.peak_act);
  u.fused_peak = static_cast<std::size_t>(fused.peak_total);
  u.fused_peak_activations = static_cast<std::size_t>(fused.peak_act);
  u.backward_peak_kv = static_cast<std::size_t>(split.peak_kv);
  u.fused_peak_kv = static_cast<std::size_t>(fused.peak_kv);
  return u;
}

}  // namespace plait::spec
