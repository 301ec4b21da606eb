#include "plait/plan/memory_policy.h"

#include <algorithm>

#include "plait/plan/plan.h"

namespace plait::plan {

namespace {
constexpr double kGiB = 1024.0 * 1024 * 1024;
}

double MemoryPolicy::static_bytes(std::int64_t parameters, int group_size) const {
  return static_bytes(parameters, 1.0 / group_size, default_shard(precision, group_size));
}

namespace {
spec::ShardedStateBytes state(std::int64_t parameters, double shard_fraction, const spec::ShardPolicy& shard,
                              Precision precision) {
  const auto shard_elements = static_cast<std::int64_t>(static_cast<double>(parameters) * shard_fraction);
  return spec::sharded_state_bytes(parameters, shard_elements, shard, precision);
}
}  // namespace

double MemoryPolicy::static_bytes(std::int64_t parameters, double shard_fraction, const spec::ShardPolicy& shard) const {
  return state(parameters, shard_fraction, shard, precision).device_peak();
}

double MemoryPolicy::host_bytes(std::int64_t parameters, double shard_fraction, const spec::ShardPolicy& shard) const {
  return state(parameters, shard_fraction, shard, precision).host_peak();
}

double MemoryPolicy::reserve_bytes(double capacity) const {
  return precision == Precision::bf16 && !cpu_engine ? 2 * kGiB : 0.10 * capacity;
}

double MemoryPolicy::sync_bytes_per_parameter() const {
  return sync_bytes_per_parameter(default_shard(precision, 2));
}

double MemoryPolicy::sync_bytes_per_parameter(const spec::ShardPolicy& shard) const {
  const spec::ParameterBytes bytes = spec::parameter_bytes(precision);
  const auto gradients = static_cast<double>(spec::dp_gradient_bytes(precision, grad_reduce));
  return shard.level == 0 ? 2 * gradients : gradients + bytes.parameters;
}

double MemoryPolicy::working_bytes(const spec::ModelSpec& model, int microbatch_size,
                                   const spec::SequencePartition& partition,
                                   const spec::StagePart& part) const {
  // The longest unit is the largest in everything but its attention prefix; take the last
  // segment of that length (the longest prefix).
  int longest = 0;
  for (int i = 0; i < partition.count(); ++i) {
    if (partition.lengths[static_cast<std::size_t>(i)] >= partition.lengths[static_cast<std::size_t>(longest)]) longest = i;
  }
  const spec::UnitMemory u = spec::unit_memory(model, part, microbatch_size, partition.segment(longest),
                                               precision, 1);
  if (precision == Precision::fp32 || cpu_engine) {
    double dkv = 0;  // the micro-batch's accumulators, all allocated by its first B
    for (int i = 0; i < partition.count(); ++i) {
      dkv += static_cast<double>(spec::unit_memory(model, part, microbatch_size, partition.segment(i), precision, 1).dkv);
    }
    const double message_element = precision == Precision::bf16 ? 2.0 : 4.0;  // stage messages' type
    const double receives =
        2.0 * message_element * microbatch_size * static_cast<double>(partition.lengths[longest]) * model.hidden;
    return static_cast<double>(std::max(u.backward_peak, u.fused_peak)) + dkv + receives;
  }
  return part.recompute_layers > 0 ? static_cast<double>(u.recompute_layer) : 0.0;
}

std::string MemoryPolicy::describe() const {
  const auto reduction = [this] {
    return std::string(grad_reduce == spec::GradReduce::bf16 ? "; data parallelism reduces bf16 gradients (2 B on the wire)"
                                                             : "");
  };
  if (precision == Precision::fp32) {
    return std::string("fp32 (plait's CPU engine): 4 B weights + 4 B gradients + 8 B AdamW state per parameter, sharded "
                       "over a stage's group or offloaded where the plan's shard choice says (spec/sharded_state.h); "
                       "activations by the engine's unit table (spec/unit_memory.h)") +
           (recompute.any() ? ", recomputing " + recompute.describe() : "") + "; 10% reserve";
  }
  if (cpu_engine) {
    return std::string("bf16 mixed precision on plait's CPU engine: 2 B weights + 4 B fp32 gradients per parameter, "
                       "12 B optimizer state (fp32 master and moments), sharded or offloaded where the plan's shard "
                       "choice says (spec/sharded_state.h); activations by the engine's bf16 unit table "
                       "(spec/unit_memory.h)") +
           (recompute.any() ? ", recomputing " + recompute.describe() : "") + "; 10% reserve (no GPU reserve)" +
           reduction();
  }
  return std::string("bf16 mixed precision: 2 B weights + 4 B fp32 gradients per parameter, 12 B optimizer "
                     "state sharded over the stage's data-parallel group (or as the plan's shard choice says); "
                     "activations by the unit table "
                     "(spec/unit_memory.h)") +
         (recompute.any() ? ", recomputing " + recompute.describe() + " (layer inputs and K/V kept)" : "") +
         "; 2 GiB reserve" + reduction();
}

}  // namespace plait::plan
