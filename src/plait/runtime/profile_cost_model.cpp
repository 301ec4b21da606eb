#include "plait/runtime/profile_cost_model.h"

#include <string>

#include "plait/core/error.h"

namespace plait::runtime {

ProfileCostModel::ProfileCostModel(const SegmentProfile& profile, const PipelinePlan& plan,
                                   sim::LinkProfile link)
    : segments_(plan.partition.count()), link_(link) {
  if (profile.partition.lengths != plan.partition.lengths || profile.microbatch_size != plan.microbatch_size) {
    throw Error("the profile was measured for other segments or micro-batch size than the plan's");
  }
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
    }
  }
  for (const DeviceEmulation& d : plan.devices) slowdown_.push_back(d.slowdown);
}

double ProfileCostModel::compute_seconds(int rank, schedule::ActionKind kind, std::int32_t,
                                         std::int32_t segment, std::int32_t vstage) const {
  const UnitTimes& u = units_[static_cast<std::size_t>(vstage) * segments_ + segment];
  double t = 0;
  switch (kind) {
    case schedule::ActionKind::F: t = u.forward; break;
    case schedule::ActionKind::B: t = u.backward_input; break;
    case schedule::ActionKind::W: t = u.backward_weight; break;
    case schedule::ActionKind::BW: t = u.backward(); break;
  }
  return t * slowdown_[static_cast<std::size_t>(rank)];
}

double ProfileCostModel::transfer_seconds(int, int, std::int64_t bytes) const {
  return link_.transfer_seconds(bytes);
}

}  // namespace plait::runtime
