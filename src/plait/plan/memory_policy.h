#pragma once
// What a device holds, by precision (the memory side of a plan):
//
// mixed16 (fp16/bf16 mixed precision, the GPU profiles): 2-byte weights and a 4-byte fp32
//   gradient buffer on every rank of a stage; the optimizer state (fp32 master weights and
//   AdamW's two moments, 12 bytes per parameter; ZeRO, arXiv 1910.02054 sec. 3.1) sharded over
//   the stage's data-parallel group, as Megatron-LM's distributed optimizer and Zorse do (Zorse
//   also shards weights and gradients; plait does not). Activations as the simulator's default
//   coefficients (Korthikanti et al., arXiv 2205.05198: 34H bytes per token and layer with
//   FlashAttention). A reserve of 2 GiB per GPU for the CUDA context, library workspaces and
//   allocator fragmentation (Zorse's planner reserves 2 GB).
//   With full recomputation (activation checkpointing, arXiv 1604.06174) a unit keeps only its
//   layer inputs (2H bytes per token and layer) and the K/V prefix later segments need (4H); the
//   backward rebuilds one layer at a time, so the largest unit's one-layer activations (34H per
//   token, plus the logits on the last stage) are reserved as a working set; the time cost (the
//   forward runs again) is charged by the simulator. Only fused-backward families recompute.
//
// fp32 (plait's CPU engine, model/unit_memory.h): 4-byte weights, 4-byte gradients, 8-byte
//   AdamW moments, not sharded (the runtime keeps the full optimizer state on every rank).
//   Activations 64H bytes per token and layer (14H floats of layer activations and the unit's
//   own K and V, 2H floats), 4 bytes per materialised attention probability, the logits in fp32
//   and 2H floats of the head's inputs, 80H bytes kept from B to W (18H floats and the unit's
//   dK/dV accumulator, 2H): the values runtime::engine_memory_coefficients derives from the
//   engine's exact unit sizes, up to a few bytes per token (plan/ cannot depend on the runtime;
//   tests/plan checks they agree). The reserve is 10% of the device's capacity: transient
//   buffers inside a layer's backward, other segments' dK/dV accumulators, communication
//   buffers.
#include <cstdint>
#include <string>

#include "plait/plan/cluster_spec.h"
#include "plait/schedule/model_shape.h"
#include "plait/sim/memory_model.h"

namespace plait::plan {

struct MemoryPolicy {
  Precision precision = Precision::mixed16;
  bool recompute = false;

  sim::MemoryCoefficients coefficients() const;
  // Bytes per parameter of weights + gradients (every rank) and of the optimizer state.
  double replicated_bytes_per_parameter() const;
  double optimizer_bytes_per_parameter() const;
  bool shards_optimizer() const { return precision == Precision::mixed16; }
  // Static bytes of a rank holding `parameters` in a data-parallel group of `group_size`.
  double static_bytes(std::int64_t parameters, int group_size) const;
  double reserve_bytes(double capacity) const;
  // Bytes per parameter a stage's gradient synchronisation moves per rank and ring step unit:
  // mixed16 reduce-scatters fp32 gradients and all-gathers the bf16 weights (4 + 2), fp32
  // all-reduces fp32 gradients (reduce-scatter + all-gather of 4 bytes each).
  double sync_bytes_per_parameter() const;
  // Bytes a rank needs beyond its static state and the units it holds, for its largest unit
  // (b sequences of `unit_tokens` tokens; `head`: the rank holds the LM head).
  //   mixed16: recomputation's working set, one layer of that unit rebuilt (34H bytes per token,
  //     plus the fp32 logits on the head stage); the 2 GiB reserve covers the rest.
  //   fp32: the engine's transients (model/unit_memory.cpp's backward walk): a layer's backward
  //     temporaries, 11H floats per token, the attention backward's workspace (min(s, 128) x
  //     keys floats per thread, one thread), on the head stage the dlogits and the head's
  //     gradients (V + 2H floats per token), and two posted receive buffers (b s H floats each).
  double working_bytes(const schedule::ModelShape& shape, int microbatch_size, std::int64_t unit_tokens,
                       bool head) const;
  // One line for reports.
  std::string describe() const;
};

}  // namespace plait::plan
