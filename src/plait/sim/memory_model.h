#pragma once
// Memory of a pipeline rank: what stays (parameters, gradients, optimizer state of the stages it
// holds) and what comes and goes with the schedule (each in-flight unit's activations and K/V).
// Every figure comes from the model description's formulas (spec/unit_memory.h), the same ones
// the engine's allocations are tested against, for the run's precision:
//   - a unit holds forward_activations + forward_kv from the start of its F (with
//     recomputation, its recomputed layers keep only their inputs and K/V, which later segments
//     attend to: spec/unit_memory.h);
//   - when B ends it still holds what W needs (activations_after_b) and its dK/dV;
//   - W (or B+W) frees the rest.
// Static bytes per parameter: spec::parameter_bytes(precision) (fp32: 4 + 4 + 8; bf16 mixed
// precision: 2 + 4 + 12).
#include <cstdint>
#include <vector>

#include "plait/spec/model_spec.h"
#include "plait/spec/recompute.h"
#include "plait/sim/sharded_memory.h"
#include "plait/spec/sequence_partition.h"
#include "plait/spec/unit_memory.h"

namespace plait::sim {

struct StaticMemory {
  std::int64_t parameter_count = 0;
  double parameters = 0, gradients = 0, optimizer = 0;
  // Tensor parallelism: the communication buffers of the rank's largest unit
  // (spec::UnitMemory::communication), allocated once and reused by every action.
  double communication = 0;
  double total() const { return parameters + gradients + optimizer + communication; }
};

// How the run keeps its state: the precision's element sizes, the layers each virtual stage
// recomputes (spec/recompute.h; arXiv 1604.06174) and the threads a CPU rank runs (its attention
// workspace).
struct MemoryOptions {
  spec::Precision precision = spec::Precision::bf16;
  spec::Recompute recompute;
  int threads = 1;
  // Tensor-parallel degree of each virtual stage (spec/tensor_parallel_plan.h; one entry: every
  // stage; empty: 1): parameters and unit bytes are then one rank's of the TP group.
  std::vector<int> tensor_parallel = {};
  int tensor_parallel_of(std::int32_t vstage) const {
    if (tensor_parallel.empty()) return 1;
    return tensor_parallel.size() == 1 ? tensor_parallel.front() : tensor_parallel.at(static_cast<std::size_t>(vstage));
  }
};

class MemoryModel {
 public:
  // Throws plait::Error when options.recompute names more layers than a virtual stage holds.
  MemoryModel(const spec::ModelSpec& model, std::vector<int> vstage_layers,
              const spec::SequencePartition& partition, int microbatch_size,
              const MemoryOptions& options);

  int num_segments() const { return segments_; }
  // Bytes a unit holds from the start of its F to the end of its B.
  double activation_bytes(std::int32_t vstage, std::int32_t segment) const { return unit(vstage, segment).activation; }
  // Bytes still held between the end of B and the end of W.
  double held_for_weight_bytes(std::int32_t vstage, std::int32_t segment) const { return unit(vstage, segment).held_for_w; }
  // The unit's share of a micro-batch's tokens: s / S.
  double token_share(std::int32_t segment) const { return token_share_[segment]; }
  // The unit's exact bytes (spec::unit_memory) for the stage part of `vstage`.
  const spec::UnitMemory& unit_memory(std::int32_t vstage, std::int32_t segment) const {
    return unit(vstage, segment).exact;
  }

  // The dK/dV accumulators of all of a micro-batch's units on `vstage`, which its first
  // backward allocates.
  double microbatch_dkv_bytes(std::int32_t vstage) const { return microbatch_dkv_[vstage]; }

  // One rank's parameters of `vstage` (of its TP group, spec::tensor_parallel_stage_parameters).
  std::int64_t parameter_count(std::int32_t vstage) const { return parameters_[vstage]; }
  // The TP communication buffers of the stage's largest unit (0 at t = 1).
  double communication_bytes(std::int32_t vstage) const { return communication_[vstage]; }
  StaticMemory static_memory(const std::vector<std::int32_t>& vstages) const;
  // A chunk of `vstage` on a rank holding `shard_fraction` of it (its share of the stage's
  // elements; 1 when alone or at level 0) under `policy`, in the options' precision: the bytes
  // by phase of spec::sharded_state_bytes, for the simulator's replay and the planner.
  ChunkState chunk_state(std::int32_t vstage, const spec::ShardPolicy& policy, double shard_fraction) const;
  const MemoryOptions& options() const { return options_; }

 private:
  struct Unit {
    spec::UnitMemory exact;
    double activation = 0, held_for_w = 0;
  };
  const Unit& unit(std::int32_t vstage, std::int32_t segment) const {
    return units_[static_cast<std::size_t>(vstage) * segments_ + segment];
  }
  int segments_;
  MemoryOptions options_;
  std::vector<Unit> units_;
  std::vector<double> token_share_;
  std::vector<std::int64_t> parameters_;
  std::vector<double> microbatch_dkv_;
  std::vector<double> communication_;  // per virtual stage
};

}  // namespace plait::sim
