#pragma once
// What a device holds, by precision (the memory side of a plan). Every per-unit and
// per-parameter figure comes from the model description (spec/unit_memory.h), the formulas the
// engine's allocations are tested against; the policy adds only what is not a unit's:
//
// bf16 (mixed precision, the GPU profiles; the cluster spec says "mixed16"): 2-byte weights and
//   a 4-byte fp32 gradient buffer on every rank of a stage; the optimizer state (fp32 master
//   weights and AdamW's two moments, 12 bytes per parameter; ZeRO, arXiv 1910.02054 sec. 3.1)
//   sharded over the stage's data-parallel group by default, as Megatron-LM's distributed
//   optimizer and Zorse do; the planner may choose another level or offload per stage
//   (spec/sharded_state.h, docs/planner.md). A reserve of 2 GiB
//   per GPU for the CUDA context, library workspaces and allocator fragmentation (Zorse's
//   planner reserves 2 GB). With recomputation (per-layer activation checkpointing, arXiv
//   1604.06174; spec/recompute.h) a recomputed layer keeps its input and K/V from F to B
//   (spec::unit_memory with StagePart::recompute_layers), and the one layer rebuilt at a time is
//   the working set; the time cost (the rebuild) is charged by the cost model. Every family
//   recomputes; with the B/W split a unit holds what W needs after its B, as without.
//
// fp32 (plait's CPU engine): 4-byte weights, 4-byte gradients, 8-byte AdamW moments, not
//   sharded by default (level 0), sharded where the planner chooses a level for a stage. The working set is the
//   largest unit's backward peak (spec::UnitMemory::backward_peak / fused_peak, the engine's
//   temporaries inside one B, a recomputed layer's rebuild included), its micro-batch's dK/dV
//   accumulators (allocated at its first B)
//   and two posted receive buffers; the reserve is 10% of the device's capacity for what
//   neither models (communication buffers in flight, the pool's cached blocks). A bf16 plan of
//   an emulated cluster (CPU ranks running the bf16 engine) is counted the same way, with the
//   bf16 unit table and 2-byte messages (cpu_engine).
#include <cstdint>
#include <string>

#include "plait/plan/cluster_spec.h"
#include "plait/sim/memory_model.h"
#include "plait/spec/precision_policy.h"
#include "plait/spec/sharded_state.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::plan {

struct MemoryPolicy {
  Precision precision = Precision::bf16;
  spec::Recompute recompute;  // the layers each virtual stage recomputes
  // The devices are plait's CPU engine (an emulated cluster, ClusterSpec::emulated), in either
  // precision: the engine's working set and the 10% reserve, as fp32 above, with the
  // precision's bytes; no GPU reserve (a bf16 CPU rank has no CUDA context to hold).
  bool cpu_engine = false;
  // What data parallelism reduces (ClusterSpec::grad_reduce): the gradients' bytes on the wire.
  spec::GradReduce grad_reduce = spec::GradReduce::fp32;

  // The simulator's view of the same policy (threads: a CPU rank's attention workspace).
  // tensor_parallel: the TP degree of each virtual stage (empty: 1).
  sim::MemoryOptions memory_options(int threads = 1, std::vector<int> tensor_parallel = {}) const {
    return {precision, recompute, threads, std::move(tensor_parallel)};
  }
  // Static device bytes of a rank holding `parameters` in a data-parallel group of `group_size`
  // under the precision's default sharding (default_shard in plan.h: bf16 level 1, fp32 level 0).
  double static_bytes(std::int64_t parameters, int group_size) const;
  // ... under `shard`, the rank owning `shard_fraction` of the parameters: the device's peak of
  // weights + gradients + optimizer state, and the host tier's, by spec::sharded_state_bytes
  // (the formula the runtime allocates by; docs/runtime.md).
  double static_bytes(std::int64_t parameters, double shard_fraction, const spec::ShardPolicy& shard) const;
  double host_bytes(std::int64_t parameters, double shard_fraction, const spec::ShardPolicy& shard) const;
  double reserve_bytes(double capacity) const;
  // Bytes per parameter a stage's gradient synchronisation moves per rank and ring step unit:
  // bf16 reduce-scatters fp32 gradients (2 B bf16 ones under grad_reduce bf16) and all-gathers
  // the bf16 weights (4 + 2, or 2 + 2), fp32
  // all-reduces fp32 gradients (reduce-scatter + all-gather of 4 bytes each); with a sharding
  // policy: the gradients' bytes reduce-scattered plus the weights' all-gathered (after the
  // update at levels 1-2, before the first use at 3), or the gradients' twice at level 0.
  double sync_bytes_per_parameter() const;
  double sync_bytes_per_parameter(const spec::ShardPolicy& shard) const;
  // Bytes a rank needs beyond its static state and the units it holds, for the partition's
  // longest unit of `microbatch_size` sequences on a stage part (above; part.recompute_layers
  // > 0: the part recomputes).
  double working_bytes(const spec::ModelSpec& model, int microbatch_size,
                       const spec::SequencePartition& partition, const spec::StagePart& part) const;
  // One line for reports.
  std::string describe() const;
};

}  // namespace plait::plan
