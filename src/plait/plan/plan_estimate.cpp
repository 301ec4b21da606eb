#include "plait/plan/plan_estimate.h"

#include <algorithm>

#include "plait/plan/device_memory.h"
#include "plait/plan/gradient_sync.h"
#include "plait/plan/plan_schedule.h"
#include "plait/plan/plan_simulation.h"
#include "plait/schedule/activation_offload.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/memory_model.h"

namespace plait::plan {

using schedule::ActionKind;

UnitTimes::UnitTimes(const PlanningProblem& problem, const std::vector<sim::DeviceProfile>& type_profiles,
                     int microbatch_size, spec::SequencePartition partition)
    : segments_(static_cast<int>(partition.lengths.size())),
      microbatch_size_(microbatch_size),
      partition_(std::move(partition)) {
  // Two one-layer virtual stages, the second with the head: its extra time is the head's. One
  // "rank" per kind: the types at t = 1, then the problem's TP kinds (a type's profile, its degree
  // and ring link).
  const int types = problem.num_kinds();
  std::vector<sim::DeviceProfile> profiles;
  std::vector<sim::RankTensorParallel> tp;
  for (int k = 0; k < types; ++k) {
    profiles.push_back(type_profiles[static_cast<std::size_t>(problem.kind_type(k))]);
    tp.push_back({problem.kind_degree(k), problem.kind_link(k)});
  }
  const double element = problem.cluster.precision == Precision::fp32 ? 4.0 : 2.0;
  sim::FlopsCostModel cost(problem.model.model, {1, 1}, partition_, microbatch_size, profiles);
  sim::FlopsCostModel recomputed(problem.model.model, {1, 1}, partition_, microbatch_size, profiles);
  recomputed.set_recompute(spec::Recompute::stages({1, 0}));
  if (!problem.tp_kinds.empty()) {
    cost.set_tensor_parallel(tp, element);
    recomputed.set_tensor_parallel(tp, element);
  }
  for (int t = 0; t < types; ++t) {
    for (int j = 0; j < segments_; ++j) {
      rebuild_.push_back(recomputed.compute_seconds(t, ActionKind::B, 0, j, 0) -
                         cost.compute_seconds(t, ActionKind::B, 0, j, 0));
    }
  }
  seconds_.resize(static_cast<std::size_t>(types) * 3 * segments_ * 2);
  for (int t = 0; t < types; ++t) {
    overhead_.push_back(profiles[t].action_overhead_seconds);
    for (int kind = 0; kind < 3; ++kind) {
      for (int j = 0; j < segments_; ++j) {
        const ActionKind k = static_cast<ActionKind>(kind);
        const double layer = cost.compute_seconds(t, k, 0, j, 0) - overhead_.back();
        double* out = &seconds_[((static_cast<std::size_t>(t) * 3 + kind) * segments_ + j) * 2];
        out[0] = layer;
        out[1] = cost.compute_seconds(t, k, 0, j, 1) - layer;
      }
    }
  }
}

PlanPrediction estimate_plan(const PlanningProblem& problem, const PlanChoice& choice, const UnitTimes& times) {
  const int groups = choice.num_groups(), k = choice.segments;
  const int vstages = static_cast<int>(choice.vstage_layers.size());
  const schedule::ScheduleFamily& family = choice.policy();
  const bool split = family.split_backward;
  const bool v_shape = family.placement == schedule::StagePlacement::v_shape;
  const MemoryPolicy policy{problem.cluster.precision, choice.recompute(), problem.cluster.emulated,
                            problem.cluster.grad_reduce};
  const spec::SequencePartition memory_cut =
      planned_memory_partition(problem, choice.microbatch_size, times.partition(), document_cut_multiple(choice));
  const sim::MemoryModel memory(problem.model.model, choice.vstage_layers, memory_cut,
                                choice.microbatch_size, policy.memory_options(1, choice.vstage_tensor_parallel()));
  const std::vector<int> devices = choice.rank_devices();
  const int ranks = static_cast<int>(devices.size());
  const double m = choice.num_microbatches;
  // Each rank's kind: its type, or its TP group's kind (UnitTimes' rows).
  std::vector<int> rank_kind(static_cast<std::size_t>(ranks));
  for (const StageGroup& g : choice.groups) {
    for (int d : g.devices) {
      const auto r = static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin());
      rank_kind[r] = problem.kind(d, g.tp);
    }
  }
  auto type_of_rank = [&](int r) { return rank_kind[static_cast<std::size_t>(r)]; };
  // Seconds of one unit (kind 0 F, 1 B, 2 W) on rank r; B also rebuilds the recomputed layers.
  // Each action pays the fixed cost once: F, B and (split) W, or a fused BW.
  auto unit = [&](int r, int kind, int seg, std::int32_t s) {
    const int t = type_of_rank(r);
    const double recomputed = choice.recomputes() && kind == 1 ? choice.recompute_layers[s] * times.rebuild(t, seg) : 0.0;
    const double fixed = kind < 2 || split ? times.action_overhead(t) : 0.0;
    return choice.vstage_layers[s] * times.layer(t, kind, seg) + (s == vstages - 1 ? times.head(t, kind, seg) : 0.0) +
           recomputed + fixed;
  };

  const schedule::HeterogeneousPipeline pipeline = heterogeneous_pipeline(choice);
  const schedule::Layout layout = schedule::heterogeneous_layout(pipeline, family.placement);
  schedule::HeterogeneousCosts costs;
  costs.unit_seconds = [&](int r, ActionKind kind, std::int32_t seg, std::int32_t s) {
    return unit(r, static_cast<int>(kind), seg, s);
  };
  const std::vector<int> limits = schedule::heterogeneous_in_flight_limits(family, pipeline, layout, costs);

  PlanPrediction out;
  out.devices.resize(ranks);
  std::vector<double> e(groups, 0.0), drain_unit(groups, 0.0);  // mean unit time, and its B (+ W)
  double work = 0, busy = 0;
  double unit_bytes = 0;
  for (int j = 0; j < k; ++j) unit_bytes += message_bytes(problem, choice, times.partition(), j) / k;
  for (int g = 0; g < groups; ++g) {
    const StageGroup& group = choice.groups[g];
    const std::vector<std::int32_t> held = choice.group_vstages(g);
    double activation = 0;  // mean bytes of one unit on this group
    for (std::int32_t s : held) {
      for (int j = 0; j < k; ++j) {
        // With the B/W split a recomputing stage's units hold after their B what W needs, as
        // without recomputation: the larger of that and what they keep from F.
        const bool recomputed = split && choice.recomputes() && choice.recompute_layers[s] > 0;
        activation += recomputed ? std::max(memory.activation_bytes(s, j), memory.held_for_weight_bytes(s, j))
                                 : memory.activation_bytes(s, j);
      }
    }
    const double units_per_mb = static_cast<double>(k) * held.size();
    activation /= units_per_mb;
    // A neighbouring group, for the link the rank's messages take (activations one way,
    // gradients the other: about two messages per unit).
    const int next = groups == 1 ? -1 : g + 1 < groups ? g + 1 : g - 1;
    // A TP group's devices each send their sequence slice through their own port.
    const double slice = next >= 0 ? unit_bytes / std::min(group.tp, choice.groups[next].tp) : 0.0;
    for (std::size_t i = 0; i < group.devices.size(); ++i) {
      const int d = group.devices[i];
      const int r = static_cast<int>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin());
      double f = 0, b = 0, w = 0;
      for (std::int32_t s : held) {
        for (int j = 0; j < k; ++j) {
          f += unit(r, 0, j, s);
          b += unit(r, 1, j, s);
          w += unit(r, 2, j, s);
        }
      }
      const double n = group.microbatches[i];
      const double load = n * (f + b + w);
      double port = 0;
      if (next >= 0) {
        const sim::LinkProfile& link = problem.cluster.link(d, choice.groups[next].devices[0]);
        port = n * units_per_mb * 2 * link.transfer_seconds(static_cast<std::int64_t>(slice));
      }
      work = std::max({work, load, port});
      busy += load;
      e[g] += n / m * (split ? std::max(0.0, f + b - w) : f + b + w) / units_per_mb;
      drain_unit[g] += n / m * (b + w) / units_per_mb;
      DevicePrediction& p = out.devices[r];
      p = device_memory(problem, choice, policy, memory, memory_cut, g, i, r);
      p.busy_seconds = load;
      const double all_units = n * units_per_mb;
      const double in_flight = limits[r] > 0 ? std::min<double>(limits[r], all_units) : all_units;
      // Activation offload keeps at most kOffloadResidentUnits on the device, the rest on the host.
      const double resident = choice.offloads_activations(g)
                                  ? std::min<double>(in_flight, schedule::kOffloadResidentUnits) : in_flight;
      p.activation_bytes = resident * activation;
      p.host_bytes += (in_flight - resident) * activation;
    }
  }
  double sum_e = 0, max_e = 0;
  for (double x : e) {
    sum_e += x;
    max_e = std::max(max_e, x);
  }
  double bubble = sum_e - max_e;
  // The V's fill and drain cross half a model per stage (ZB-V, arXiv 2401.10241 sec. 6).
  if (v_shape) bubble *= 0.5;
  // Messages on the critical path: the first forward and the last backward cross every boundary.
  double chain = 0;
  for (std::int32_t s = 0; s + 1 < vstages; ++s) {
    const int from = schedule::placed_position(family.placement, groups, s);
    const int to = schedule::placed_position(family.placement, groups, s + 1);
    if (from == to) continue;
    const int share = std::min(choice.groups[from].tp, choice.groups[to].tp);
    chain += 2 * problem.cluster.link(choice.groups[from].devices[0], choice.groups[to].devices[0])
                     .transfer_seconds(static_cast<std::int64_t>(unit_bytes / share));
  }
  out.pipeline_seconds = work + bubble + chain;
  const std::vector<double> sync = group_sync_seconds(problem, choice, memory, policy);
  double step = out.pipeline_seconds, drained = 0;
  for (int g = 0; g < groups; ++g) {
    // With one chunk, group g's last backward comes before the backwards of the groups ahead of
    // it; with several chunks every group works until about the end.
    const double finish = out.pipeline_seconds - (layout.max_chunks() == 1 ? drained : 0.0);
    step = std::max(step, finish + sync[g]);
    out.sync_seconds = std::max(out.sync_seconds, sync[g]);
    drained += drain_unit[g];
  }
  out.step_seconds = step;
  out.bubble_fraction = 1.0 - busy / (ranks * out.pipeline_seconds);
  out.tokens_per_second = problem.tokens_per_step() / step;
  check_memory(problem.cluster, out);
  return out;
}

}  // namespace plait::plan
