#include "plait/schedule/heterogeneous_pipeline.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "plait/core/error.h"
#include "plait/schedule/list_scheduler.h"
#include "plait/schedule/schedule_family.h"

namespace plait::schedule {

namespace {

// Seconds per micro-batch (all segments, F + B + W) of `rank` on `vstage`.
double period(const HeterogeneousCosts& costs, int rank, std::int32_t vstage, int segments) {
  double t = 0;
  for (std::int32_t seg = 0; seg < segments; ++seg) {
    t += costs.unit_seconds(rank, ActionKind::F, seg, vstage) +
         costs.unit_seconds(rank, ActionKind::B, seg, vstage) +
         costs.unit_seconds(rank, ActionKind::W, seg, vstage);
  }
  return t;
}

// The group holding each virtual stage.
std::vector<int> group_of_vstage(const HeterogeneousPipeline& pipeline, const Layout& layout) {
  std::vector<int> group(layout.num_vstages, -1);
  for (int g = 0; g < pipeline.num_groups(); ++g) {
    for (std::int32_t s : layout.rank_vstages[pipeline.stage_ranks[g][0]]) group[s] = g;
  }
  return group;
}

}  // namespace

int HeterogeneousPipeline::num_ranks() const {
  int n = 0;
  for (const auto& g : stage_ranks) n += static_cast<int>(g.size());
  return n;
}

void check_heterogeneous_pipeline(const HeterogeneousPipeline& p) {
  const std::string who = "heterogeneous pipeline: ";
  if (p.stage_ranks.empty()) throw Error(who + "no stage groups");
  if (p.stage_counts.size() != p.stage_ranks.size()) {
    throw Error(who + std::to_string(p.stage_ranks.size()) + " groups of ranks but " +
                std::to_string(p.stage_counts.size()) + " groups of micro-batch counts");
  }
  if (p.num_microbatches < 1 || p.num_segments < 1 || p.chunks < 1) {
    throw Error(who + "expected micro-batches, segments and chunks >= 1");
  }
  const int ranks = p.num_ranks();
  std::vector<int> seen(ranks, -1);
  for (int g = 0; g < p.num_groups(); ++g) {
    const auto& members = p.stage_ranks[g];
    if (members.empty()) throw Error(who + "group " + std::to_string(g) + " has no ranks");
    if (p.stage_counts[g].size() != members.size()) {
      throw Error(who + "group " + std::to_string(g) + " has " + std::to_string(members.size()) +
                  " ranks but " + std::to_string(p.stage_counts[g].size()) + " micro-batch counts");
    }
    long total = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const int r = members[i];
      if (r < 0 || r >= ranks) {
        throw Error(who + "group " + std::to_string(g) + ": rank " + std::to_string(r) +
                    " is outside [0, " + std::to_string(ranks) + ")");
      }
      if (seen[r] >= 0) {
        throw Error(who + "rank " + std::to_string(r) + " is in groups " + std::to_string(seen[r]) +
                    " and " + std::to_string(g));
      }
      seen[r] = g;
      if (p.stage_counts[g][i] < 0) {
        throw Error(who + "rank " + std::to_string(r) + " has a negative micro-batch count");
      }
      total += p.stage_counts[g][i];
    }
    if (total != p.num_microbatches) {
      throw Error(who + "the micro-batch counts of group " + std::to_string(g) + " add up to " +
                  std::to_string(total) + ", expected " + std::to_string(p.num_microbatches));
    }
  }
}

PipelineShape HeterogeneousPipeline::shape() const {
  return PipelineShape{num_groups(), chunks, num_microbatches, num_segments};
}

std::string heterogeneous_unsupported(std::string_view family, const HeterogeneousPipeline& pipeline) {
  const ScheduleFamily* f = find_schedule_family(family);
  if (!f) {
    return "unknown schedule '" + std::string(family) + "'; expected one of " + schedule_family_names();
  }
  return unsupported_reason(*f, pipeline.shape());
}

Layout heterogeneous_layout(const HeterogeneousPipeline& pipeline, StagePlacement placement) {
  const int groups = pipeline.num_groups();
  Layout layout;
  layout.rank_vstages.resize(pipeline.num_ranks());
  layout.num_vstages = groups * pipeline.chunks;
  layout.num_microbatches = pipeline.num_microbatches;
  layout.num_segments = pipeline.num_segments;
  for (int g = 0; g < groups; ++g) {
    for (int r : pipeline.stage_ranks[g]) {
      for (int c = 0; c < pipeline.chunks; ++c) layout.rank_vstages[r].push_back(placed_vstage(placement, groups, g, c));
    }
  }
  return layout;
}

HeterogeneousPipeline heterogeneous_pipeline_of(const Schedule& schedule, const ScheduleFamily& family) {
  const Layout& layout = schedule.layout;
  HeterogeneousPipeline p;
  p.num_microbatches = layout.num_microbatches;
  p.num_segments = layout.num_segments;
  p.chunks = layout.num_ranks() > 0 ? layout.num_chunks(0) : 0;
  if (p.chunks < 1 || layout.num_vstages % p.chunks != 0) {
    throw Error("the layout's " + std::to_string(layout.num_vstages) + " virtual stages are not " +
                std::to_string(p.chunks) + " chunks per pipeline position");
  }
  const int positions = layout.num_vstages / p.chunks;
  p.stage_ranks.resize(static_cast<std::size_t>(positions));
  p.stage_counts.resize(static_cast<std::size_t>(positions));
  for (int r = 0; r < layout.num_ranks(); ++r) {
    const int g = placed_position(family.placement, positions, layout.vstage(r, 0));
    std::vector<bool> runs(static_cast<std::size_t>(layout.num_microbatches), false);
    for (const Action& a : schedule.ranks[static_cast<std::size_t>(r)]) {
      if (a.chunk == 0 && a.kind == ActionKind::F) runs[static_cast<std::size_t>(a.microbatch)] = true;
    }
    p.stage_ranks[static_cast<std::size_t>(g)].push_back(r);
    p.stage_counts[static_cast<std::size_t>(g)].push_back(static_cast<int>(std::count(runs.begin(), runs.end(), true)));
  }
  check_heterogeneous_pipeline(p);
  if (heterogeneous_layout(p, family.placement) != layout) {
    throw Error("the layout is not the " + std::string(placement_name(family.placement)) + " placement of " +
                family.name + " over " + std::to_string(positions) + " groups of ranks");
  }
  return p;
}

std::vector<std::vector<std::int32_t>> route_microbatches(const HeterogeneousPipeline& pipeline,
                                                          const Layout& layout,
                                                          const HeterogeneousCosts& costs) {
  const int m = pipeline.num_microbatches, k = pipeline.num_segments;
  const std::vector<int> group = group_of_vstage(pipeline, layout);
  std::vector<std::vector<std::int32_t>> routing(layout.num_vstages, std::vector<std::int32_t>(m, -1));
  std::vector<double> finish(m, 0.0);  // estimated finish of each micro-batch on the previous stage
  std::vector<std::int32_t> arrival(m);

  // Stage 0: the j-th micro-batch of rank r finishes at about j * tau_r; global ids follow that
  // order (ties: the rank listed first), so lower ids are the ones the pipeline sees first.
  {
    const int g = group[0];
    struct Completion {
      double time;
      int index;
    };
    std::vector<Completion> order;
    for (std::size_t i = 0; i < pipeline.stage_ranks[g].size(); ++i) {
      const double tau = period(costs, pipeline.stage_ranks[g][i], 0, k);
      for (int j = 1; j <= pipeline.stage_counts[g][i]; ++j) order.push_back({j * tau, static_cast<int>(i)});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const Completion& a, const Completion& b) { return a.time < b.time; });
    for (int mb = 0; mb < m; ++mb) {
      routing[0][mb] = pipeline.stage_ranks[g][order[mb].index];
      finish[mb] = order[mb].time;
    }
  }
  // Later stages: in arrival order, each micro-batch to the rank with the most remaining work.
  // A group met again (its later chunks) keeps each micro-batch on the rank that ran its first
  // chunk there: the list scheduler lets a rank always continue a micro-batch it holds, which is
  // what keeps chunked layouts from stalling (list_scheduler.h).
  std::vector<std::int32_t> first_vstage(pipeline.num_groups(), -1);
  first_vstage[group[0]] = 0;
  for (std::int32_t s = 1; s < layout.num_vstages; ++s) {
    const int g = group[s];
    const auto& members = pipeline.stage_ranks[g];
    if (first_vstage[g] >= 0) {
      routing[s] = routing[first_vstage[g]];
      for (int mb = 0; mb < m; ++mb) finish[mb] += period(costs, routing[s][mb], s, k);
      continue;
    }
    first_vstage[g] = s;
    std::vector<double> tau(members.size()), free(members.size(), 0.0);
    std::vector<int> left(pipeline.stage_counts[g]);
    for (std::size_t i = 0; i < members.size(); ++i) tau[i] = period(costs, members[i], s, k);
    std::iota(arrival.begin(), arrival.end(), 0);
    std::stable_sort(arrival.begin(), arrival.end(),
                     [&](std::int32_t a, std::int32_t b) { return finish[a] < finish[b]; });
    for (std::int32_t mb : arrival) {
      int best = -1;
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (left[i] == 0) continue;
        if (best < 0) {
          best = static_cast<int>(i);
          continue;
        }
        const double work = left[i] * tau[i], best_work = left[best] * tau[best];
        if (work > best_work || (work == best_work && free[i] < free[best])) best = static_cast<int>(i);
      }
      routing[s][mb] = members[best];
      --left[best];
      free[best] = std::max(finish[mb], free[best]) + tau[best];
      finish[mb] = free[best];
    }
  }
  return routing;
}

std::vector<int> heterogeneous_in_flight_limits(const ScheduleFamily& family,
                                                const HeterogeneousPipeline& pipeline,
                                                const Layout& layout,
                                                const HeterogeneousCosts& costs) {
  const int ranks = pipeline.num_ranks(), groups = pipeline.num_groups();
  const int k = pipeline.num_segments, v = pipeline.chunks, m = pipeline.num_microbatches;
  const PipelineShape shape = pipeline.shape();
  std::vector<int> limits(ranks, 0);
  if (!family.in_flight_limit) return limits;

  // Unit time (F + B + W of one segment, averaged over segments and chunks) of every rank, and
  // the mean unit time of each group weighted by the micro-batches its ranks run.
  std::vector<double> unit(ranks, 0.0);
  for (int r = 0; r < ranks; ++r) {
    for (std::int32_t s : layout.rank_vstages[r]) unit[r] += period(costs, r, s, k);
    unit[r] /= static_cast<double>(k) * layout.num_chunks(r);
  }
  std::vector<double> group_unit(groups, 0.0);
  for (int g = 0; g < groups; ++g) {
    for (std::size_t i = 0; i < pipeline.stage_ranks[g].size(); ++i) {
      group_unit[g] += unit[pipeline.stage_ranks[g][i]] * pipeline.stage_counts[g][i] / m;
    }
  }
  double all_mean = 0;
  for (int g = 0; g < groups; ++g) all_mean += group_unit[g] / groups;
  // Lock-step (every rank alike, every group as wide): the family's own warm-up is exact. Else a
  // micro-batch also queues behind other micro-batches at every rank it visits, so its round trip
  // is longer than the sum of unit times, and a fused-backward rank at its limit idles; twice the
  // bound keeps it busy (measured on the 64-GPU Zorse cluster, 14 stages: 1F1B's step with the
  // plain bound is 1.30x that with twice the bound, 4x is no better than 2x). Split-backward
  // families keep the plain bound: at the limit their pending W's fill the wait (ZB-H1 there:
  // 15.40 s plain, 15.31 s doubled, for twice the activation memory).
  bool alike = true;
  for (int g = 0; g < groups; ++g) {
    alike = alike && pipeline.stage_ranks[g].size() == pipeline.stage_ranks[0].size();
  }
  for (int r = 0; r < ranks; ++r) alike = alike && std::fabs(unit[r] - unit[0]) <= 1e-9 * std::fabs(unit[0]);
  const double slack = alike || family.split_backward ? 1.0 : 2.0;
  for (int g = 0; g < groups; ++g) {
    // The family's own limit for this position in a homogeneous pipeline of the same shape.
    const int homogeneous = family.limit_of(shape, g);
    for (int r : pipeline.stage_ranks[g]) {
      const double u = unit[r] > 0 ? unit[r] : 1.0;
      double scale = 1.0;
      if (v == 1) {
        // Time a unit stays in flight after its own F + B (in units of u): the later groups'
        // unit times, and k - 1 units of the slowest group from here on (a segment's backward
        // waits for the later segments of its micro-batch). 1 + that is P - g - 1 + k when all
        // ranks are alike (the 1F1B families' limit); the family's limit is scaled by its ratio.
        double later = 0, slowest = u;
        for (int h = g + 1; h < groups; ++h) {
          later += group_unit[h];
          slowest = std::max(slowest, group_unit[h]);
        }
        const double round_trip = 1 + std::ceil((later + (k - 1) * slowest) / u - 1e-9);
        scale = round_trip / (groups - g - 1 + k);
      } else {
        // Several chunks: the homogeneous limit, scaled by the mean unit time over r's.
        scale = std::max(1.0, all_mean / u);
      }
      limits[r] = static_cast<int>(std::ceil(slack * homogeneous * scale - 1e-9));
    }
  }
  return limits;
}

std::vector<int> heterogeneous_in_flight_limits(std::string_view family, const HeterogeneousPipeline& pipeline,
                                                const Layout& layout, const HeterogeneousCosts& costs) {
  return heterogeneous_in_flight_limits(schedule_family(family), pipeline, layout, costs);
}

Schedule heterogeneous_schedule(const ScheduleFamily& family, const HeterogeneousPipeline& pipeline,
                                const HeterogeneousCosts& costs) {
  check_heterogeneous_pipeline(pipeline);
  if (std::string reason = unsupported_reason(family, pipeline.shape()); !reason.empty()) throw Error(reason);
  if (!costs.unit_seconds) throw Error("heterogeneous schedule: no unit costs given");
  const Layout layout = heterogeneous_layout(pipeline, family.placement);
  ListSchedulerOptions options;
  options.split_backward = family.split_backward;
  options.forwards_first = family.forwards_first;
  options.unit_seconds = costs.unit_seconds;
  options.transfer_seconds = costs.transfer_seconds;
  options.microbatch_rank = route_microbatches(pipeline, layout, costs);
  options.rank_max_in_flight = heterogeneous_in_flight_limits(family, pipeline, layout, costs);
  return list_schedule(layout, options);
}

Schedule heterogeneous_schedule(std::string_view family, const HeterogeneousPipeline& pipeline,
                                const HeterogeneousCosts& costs) {
  const ScheduleFamily* f = find_schedule_family(family);
  if (!f) throw Error(heterogeneous_unsupported(family, pipeline));
  return heterogeneous_schedule(*f, pipeline, costs);
}

}  // namespace plait::schedule
