#include "plait/runtime/profile_cost_model.h"

#include <string>

#include "plait/core/error.h"
#include "plait/spec/precision_policy.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::runtime {

ProfileCostModel::ProfileCostModel(const SegmentProfile& profile, const PipelinePlan& plan,
                                   sim::LinkProfile link, sim::LinkProfile tp_link)
    : segments_(plan.partition.count()), link_(link) {
  if (profile.partition.lengths != plan.partition.lengths || profile.microbatch_size != plan.microbatch_size) {
    throw Error("the profile was measured for other segments or micro-batch size than the plan's");
  }
  // One profile holds units of one degree: per-stage degrees would need one per degree.
  if (!plan.uniform_tensor_parallel()) {
    throw Error("the plan runs tensor-parallel degrees that differ between stages; a profile holds units of one "
                "degree (" + std::to_string(profile.tensor_parallel) + ")");
  }
  const int t = plan.max_tensor_parallel();
  if (profile.tensor_parallel != t) {
    throw Error("the profile holds units of tensor-parallel degree " + std::to_string(profile.tensor_parallel) +
                ", the plan runs " + std::to_string(t));
  }
  // The TP collectives gather activations in the activation type and reduce-scatter fp32 partial
  // sums (spec::tp_collective_seconds).
  const double element = static_cast<double>(spec::bytes_of(spec::TensorClass::activation, plan.precision));
  const auto ring = [&](const spec::TpCollectives& c, double tokens) {
    return spec::tp_collective_seconds(c, tokens, plan.model.hidden, element, t, tp_link.latency_seconds,
                                       tp_link.bandwidth_bytes_per_second);
  };
  for (int v = 0; v < plan.num_vstages(); ++v) {
    const model::StageSpec& spec = plan.vstage_specs[static_cast<std::size_t>(v)];
    for (int j = 0; j < segments_; ++j) {
      const std::size_t s = static_cast<std::size_t>(j);
      const double n = spec.layer_count();
      if (spec.recompute_layers > 0 && profile.layer[s].recompute <= 0) {
        throw Error("virtual stage " + std::to_string(v) + " recomputes " + std::to_string(spec.recompute_layers) +
                    " layers but the profile has no recompute times (profile with recomputation)");
      }
      UnitTimes u{n * profile.layer[s].forward,
                  n * profile.layer[s].backward_input + spec.recompute_layers * profile.layer[s].recompute,
                  n * profile.layer[s].backward_weight};
      for (const auto* extra : {spec.has_embedding ? &profile.embedding[s] : nullptr,
                                spec.has_head ? &profile.head[s] : nullptr}) {
        if (extra == nullptr) continue;
        u.forward += extra->forward;
        u.backward_input += extra->backward_input;
        u.backward_weight += extra->backward_weight;
      }
      units_.push_back(u);
      const double tokens = static_cast<double>(plan.microbatch_size) * static_cast<double>(plan.partition.lengths[s]);
      const int layers = spec.layer_count();
      spec::TpCollectives rebuild;
      rebuild.all_gathers = 2 * spec.recompute_layers;
      links_.push_back({ring(spec::tp_collectives(spec::UnitPass::forward, layers, spec.has_embedding, spec.has_head), tokens),
                        ring(spec::tp_collectives(spec::UnitPass::backward_input, layers, spec.has_embedding, spec.has_head), tokens),
                        ring(spec::tp_collectives(spec::UnitPass::backward_weight, layers, spec.has_embedding, spec.has_head), tokens),
                        ring(rebuild, tokens)});
    }
  }
  for (const DeviceEmulation& d : plan.devices) slowdown_.push_back(d.slowdown);
}

double ProfileCostModel::compute_seconds(int rank, schedule::ActionKind kind, std::int32_t,
                                         std::int32_t segment, std::int32_t vstage) const {
  const std::size_t i = static_cast<std::size_t>(vstage) * segments_ + segment;
  const auto pick = [kind](const UnitTimes& u) {
    switch (kind) {
      case schedule::ActionKind::F: return u.forward;
      case schedule::ActionKind::B: return u.backward_input;
      case schedule::ActionKind::W: return u.backward_weight;
      case schedule::ActionKind::BW: return u.backward();
    }
    return 0.0;
  };
  const UnitTimes& link = links_[i];
  const double rebuilds = schedule::is_backward_input(kind) ? link.recompute : 0.0;
  return pick(units_[i]) * slowdown_[static_cast<std::size_t>(rank)] + pick(link) + rebuilds;
}

double ProfileCostModel::transfer_seconds(int, int, std::int64_t bytes) const {
  return link_.transfer_seconds(bytes);
}

}  // namespace plait::runtime
