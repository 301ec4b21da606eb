#pragma once
// The exact bytes a StageModel holds for one unit (micro-batch, segment), by lifetime, so that a
// memory model (the simulator's) can replay a schedule without running it. Derivation and
// formulas: docs/engine.md, "Memory of a unit". Notation: N = batch * s rows, C hidden, H heads,
// V vocab, L the stage's layers, e = segment end (keys visible to the segment), P = batch*H*s*e
// attention probabilities, ws = threads * min(s, 128) * e attention-backward workspace; all
// counts below are in floats (4 bytes), the struct holds bytes.
#include <cstddef>

#include "plait/model/gpt_config.h"
#include "plait/model/segment.h"
#include "plait/model/stage_spec.h"

namespace plait::model {

struct UnitMemory {
  // Activations F allocates and leaves for B/W: L*(14NC + 4N + P) + [emb] N + [head] (2NC + 2N + NV).
  std::size_t forward_activations = 0;
  // This unit's K/V (kv_cache), from its F to the end of its B: L*2NC.
  std::size_t forward_kv = 0;
  // F's peak over the bytes allocated before it (all categories): the two above + [head] N
  // (the per-token losses, freed before F returns).
  std::size_t forward_peak = 0;
  // This unit's dK/dV accumulator (kv_cache): L*2NC, allocated zeroed for EVERY unit of the
  // micro-batch by the micro-batch's first B (the last segment's), freed by the unit's W.
  std::size_t dkv = 0;
  // Activations B frees (L*(5NC + P)) and allocates to keep until W (NC*(9L + [emb] + [head])).
  std::size_t backward_freed = 0;
  std::size_t backward_kept = 0;
  // B's peak over the bytes allocated at its start, after the micro-batch's dK/dV accumulators
  // (on its first B, add the sum of its units' dkv).
  std::size_t backward_peak = 0;
  // The same for the fused backward (B+W), which ends with all of the unit's memory released.
  std::size_t fused_peak = 0;

  // Activations held between the unit's B and its W.
  std::size_t activations_after_b() const {
    return forward_activations - backward_freed + backward_kept;
  }
};

UnitMemory unit_memory_bytes(const GPTConfig& config, const StageSpec& spec, int batch,
                             const Segment& segment, int threads);

}  // namespace plait::model
