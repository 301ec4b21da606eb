#include "plait/sim/memory_model.h"

#include <cstdint>

#include <algorithm>

#include "plait/core/error.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::sim {

MemoryModel::MemoryModel(const spec::ModelSpec& model, std::vector<int> vstage_layers,
                         const spec::SequencePartition& partition, int microbatch_size,
                         const MemoryOptions& options)
    : segments_(partition.count()), options_(options) {
  const int vstages = static_cast<int>(vstage_layers.size());
  units_.resize(static_cast<std::size_t>(vstages) * segments_);
  const double total_tokens = static_cast<double>(partition.seq());
  std::vector<int> recompute;
  try {
    recompute = options.recompute.resolve(vstage_layers);
  } catch (const Error& e) {
    throw Error(std::string("memory model: recompute: ") + e.what());
  }
  for (int seg = 0; seg < segments_; ++seg) {
    token_share_.push_back(static_cast<double>(partition.lengths[seg]) / total_tokens);
    if (partition.start(seg) + partition.lengths[seg] > INT32_MAX) {
      throw Error("memory model: sequences beyond 2^31 tokens are not modelled");
    }
    const spec::Segment segment{seg, static_cast<int>(partition.start(seg)),
                                static_cast<int>(partition.lengths[seg])};
    for (int v = 0; v < vstages; ++v) {
      const spec::StagePart part{vstage_layers[v], v == 0, v == vstages - 1, recompute[v], options.tensor_parallel_of(v)};
      Unit& u = units_[static_cast<std::size_t>(v) * segments_ + seg];
      u.exact = spec::unit_memory(model, part, microbatch_size, segment, options.precision,
                                  options.threads);
      const double kv = static_cast<double>(u.exact.forward_kv);
      u.activation = static_cast<double>(u.exact.forward_activations) + kv;
      u.held_for_w = static_cast<double>(u.exact.activations_after_b() + u.exact.dkv_kept);
    }
  }
  microbatch_dkv_.assign(static_cast<std::size_t>(vstages), 0.0);
  for (int v = 0; v < vstages; ++v) {
    for (int seg = 0; seg < segments_; ++seg) microbatch_dkv_[v] += static_cast<double>(unit(v, seg).exact.dkv);
  }
  communication_.assign(static_cast<std::size_t>(vstages), 0.0);
  for (int v = 0; v < vstages; ++v) {
    for (int seg = 0; seg < segments_; ++seg) {
      communication_[v] = std::max(communication_[v], static_cast<double>(unit(v, seg).exact.communication));
    }
    // One rank's parameters of its TP group (the table's split; stage_parameters at t = 1).
    parameters_.push_back(spec::tensor_parallel_stage_parameters(model, options.tensor_parallel_of(v), vstage_layers[v],
                                                                 v == 0, v == vstages - 1));
  }
}

ChunkState MemoryModel::chunk_state(std::int32_t vstage, const spec::ShardPolicy& policy,
                                    double shard_fraction) const {
  const std::int64_t elements = parameters_[vstage];
  const auto shard = static_cast<std::int64_t>(static_cast<double>(elements) * shard_fraction);
  return {policy, spec::sharded_state_bytes(elements, shard, policy, options_.precision)};
}

StaticMemory MemoryModel::static_memory(const std::vector<std::int32_t>& vstages) const {
  StaticMemory m;
  for (std::int32_t v : vstages) m.parameter_count += parameters_[v];
  const double n = static_cast<double>(m.parameter_count);
  const spec::ParameterBytes bytes = spec::parameter_bytes(options_.precision);
  m.parameters = n * bytes.parameters;
  m.gradients = n * bytes.gradients;
  m.optimizer = n * bytes.optimizer;
  for (std::int32_t v : vstages) m.communication = std::max(m.communication, communication_[v]);
  return m;
}

}  // namespace plait::sim
