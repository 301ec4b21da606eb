#include "plait/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/plan/device_profiles.h"
#include "plait/plan/gradient_sync.h"
#include "plait/plan/load_balance.h"
#include "plait/plan/plan_estimate.h"
#include "plait/plan/plan_schedule.h"
#include "plait/plan/plan_simulation.h"
#include "plait/plan/stage_grouping.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/memory_model.h"

namespace plait::plan {

namespace {

struct FamilyOption {
  const schedule::ScheduleFamily* family;
  int chunks;
};

// A grouping that survived the coarse pass, with its devices' micro-batch counts.
struct GroupingCandidate {
  double score;
  Grouping groups;
  std::vector<std::vector<int>> counts;
  bool lockstep = false;  // every stage as wide, every device of one type
};

struct Candidate {
  PlanChoice choice;
  PlanPrediction estimate;
};

// The layout closest to fitting in memory, for the "cannot plan" message.
struct Closest {
  double ratio = std::numeric_limits<double>::infinity();
  std::string message;
  template <class Describe>
  void offer(double need, double capacity, const Describe& describe) {
    if (capacity > 0 && need / capacity < ratio) {
      ratio = need / capacity;
      message = describe();
    }
  }
};

}  // namespace

PlanningProblem make_problem(ClusterSpec cluster, spec::NamedModel model, std::int64_t global_batch,
                             std::int64_t seq, const std::vector<std::string>& used_types) {
  PlanningProblem p;
  p.type_profiles = resolve_type_profiles(cluster, model, seq, used_types);
  p.planning_profiles = p.type_profiles;
  p.cluster = std::move(cluster);
  p.model = std::move(model);
  p.global_batch = global_batch;
  p.seq = seq;
  return p;
}

PlannerResult plan_cluster(const PlanningProblem& real, const PlannerOptions& o) {
  const double start = monotonic_seconds();
  const ClusterSpec& cluster = real.cluster;
  const spec::ModelSpec& shape = real.model.model;
  const int L = shape.layers;
  const std::int64_t B = real.global_batch, S = real.seq;
  if (B < 1) throw Error("cannot plan: the global batch must be at least one sequence");
  if (S < 1 || S > shape.max_seq) {
    throw Error("cannot plan: sequence length " + std::to_string(S) + " is outside the model's [1, " +
                std::to_string(shape.max_seq) + "]");
  }

  // Devices to use.
  std::vector<int> devices;
  for (const std::string& name : o.device_types) {
    if (std::none_of(cluster.types.begin(), cluster.types.end(), [&](const DeviceType& t) { return t.name == name; })) {
      std::string names;
      for (const DeviceType& t : cluster.types) names += (names.empty() ? "" : ", ") + t.name;
      throw Error("cannot plan: " + cluster.path + " has no device type '" + name + "' (it has " + names + ")");
    }
  }
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const std::string& t = cluster.type_of(d).name;
    if (o.device_types.empty() || std::find(o.device_types.begin(), o.device_types.end(), t) != o.device_types.end()) {
      devices.push_back(d);
    }
  }

  // Schedule families and their chunk counts.
  std::vector<FamilyOption> families;
  for (const std::string& name : o.families) {
    if (!schedule::find_schedule_family(name)) {
      throw Error("cannot plan: unknown schedule '" + name + "'; expected one of " + schedule::schedule_family_names());
    }
  }
  auto has_family = [&](const std::string& name) {
    return o.families.empty() || std::find(o.families.begin(), o.families.end(), name) != o.families.end();
  };
  for (const schedule::ScheduleFamily& f : schedule::schedule_families()) {
    if (!has_family(f.name)) continue;
    families.push_back({&f, f.fixed_chunks > 0 ? f.fixed_chunks : 2});
  }

  // Micro-batch sizes, segment options, recomputation.
  std::vector<int> sizes = o.microbatch_sizes;
  if (sizes.empty()) {
    for (int b = 1; b <= 64; b *= 2) sizes.push_back(b);
  }
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](int b) { return b < 1 || B % b != 0; }), sizes.end());
  if (sizes.empty()) {
    throw Error("cannot plan: no micro-batch size tried divides the global batch of " + std::to_string(B) + " sequences");
  }
  struct SegmentOption {
    int k;
    spec::SplitMethod split;
  };
  std::vector<SegmentOption> segment_options = {{1, spec::SplitMethod::even}};
  const bool sequence_families = std::any_of(families.begin(), families.end(), [](const FamilyOption& f) {
    return f.family->sequence_level;
  });
  if (o.segments && sequence_families) {
    for (int k : {2, 4, 8}) {
      if (S / k < 16) break;  // shorter segments only add per-unit overhead
      segment_options.push_back({k, spec::SplitMethod::flops});
      segment_options.push_back({k, spec::SplitMethod::even});
    }
  }

  PlannerResult result;
  if (devices.empty()) throw Error("cannot plan: no devices selected");

  // The speeds the plan is made for: the real ones, or (even) one reference profile for all.
  PlanningProblem planning = real;
  if (o.even) {
    const UnitTimes times(real, real.type_profiles, 1, spec::even_partition(shape, S, 1));
    std::vector<std::pair<double, int>> by_speed;
    for (int d : devices) {
      const int t = cluster.devices[d].type;
      by_speed.push_back({times.layer(t, 0, 0) + times.layer(t, 1, 0) + times.layer(t, 2, 0), t});
    }
    std::sort(by_speed.begin(), by_speed.end());
    const int reference = by_speed[by_speed.size() / 2].second;
    for (sim::DeviceProfile& p : planning.type_profiles) {
      const double memory = p.memory_bytes;
      const std::string name = p.name;
      p = real.type_profiles[reference];
      p.memory_bytes = memory;
      p.name = name;
    }
    planning.planning_profiles = planning.type_profiles;
    result.reference = cluster.types[reference].name + " (the median device's type)";
  }

  // Parameters of a stage of l layers, first and/or last (the model description's count).
  auto params_of = [&](int l, bool first, bool last) { return shape.stage_parameters(l, first, last); };
  // The closest layouts to fitting: those over memory with their activations (estimated or
  // simulated), else those whose weights and optimizer state alone do not fit.
  Closest closest, closest_static;
  std::vector<Candidate> pool;
  std::map<std::tuple<int, int, int>, UnitTimes> times_cache;  // (b, k, split)
  auto times_for = [&](int b, const SegmentOption& so) -> const UnitTimes& {
    const auto key = std::make_tuple(b, so.k, static_cast<int>(so.split));
    auto it = times_cache.find(key);
    if (it == times_cache.end()) {
      it = times_cache
               .emplace(key, UnitTimes(planning, planning.type_profiles, b, spec::cut_sequence(shape, S, {so.k, {}, so.split, 1})))
               .first;
    }
    return it->second;
  };

  // Segmented units below the smallest measured work would extrapolate the profile's fit into a
  // range where per-unit overheads dominate (an emulated CPU cluster ran 32-token units 2.5x
  // slower than its fit at 256 tokens predicted), so they are not planned.
  result.min_unit_tokens = o.min_unit_tokens > 0 ? o.min_unit_tokens : 0;
  if (o.min_unit_tokens > 0) result.min_unit_source = "--min-unit-tokens";
  if (o.min_unit_tokens < 0) {
    for (int d : devices) {
      const sim::DeviceProfile& p = planning.type_profiles[cluster.devices[d].type];
      if (p.measured && p.measured->shortest_seq > result.min_unit_tokens) {
        result.min_unit_tokens = p.measured->shortest_seq;
        result.min_unit_source = "the shortest sequence measured for " + cluster.type_of(d).name;
      }
    }
  }

  for (int b : sizes) {
    const int M = static_cast<int>(B / b);
    const UnitTimes& base = times_for(b, segment_options[0]);
    const int types = static_cast<int>(cluster.types.size());
    std::vector<double> per_layer(types), head(types);  // F + B + W of one micro-batch
    for (int t = 0; t < types; ++t) {
      for (int kind = 0; kind < 3; ++kind) {
        per_layer[t] += base.layer(t, kind, 0);
        head[t] += base.head(t, kind, 0);
      }
    }
    std::vector<double> speed(cluster.num_devices());
    for (int d = 0; d < cluster.num_devices(); ++d) speed[d] = 1.0 / per_layer[cluster.devices[d].type];
    std::vector<Grouping> groupings = stage_groupings(cluster, devices, speed, std::min(o.max_groups, L));
    if (o.even) {
      // A homogeneous layout: every stage as wide (pp x dp).
      groupings.erase(std::remove_if(groupings.begin(), groupings.end(),
                                     [](const Grouping& g) {
                                       return std::any_of(g.begin(), g.end(), [&](const auto& x) { return x.size() != g[0].size(); });
                                     }),
                      groupings.end());
    }
    result.groupings += groupings.size();

    // Coarse pass: work + synchronisation + a fill/drain term with static memory only.
    const MemoryPolicy static_policy{cluster.precision, {}};
    std::vector<GroupingCandidate> coarse;
    for (const Grouping& groups : groupings) {
      const int P = static_cast<int>(groups.size());
      GroupingCandidate c{0.0, groups, {}};
      c.lockstep = true;
      for (const auto& g : groups) {
        c.lockstep = c.lockstep && g.size() == groups[0].size();
        for (int d : g) c.lockstep = c.lockstep && cluster.devices[d].type == cluster.devices[groups[0][0]].type;
      }
      bool ok = true;
      for (const auto& g : groups) {
        std::vector<double> s;
        for (int d : g) s.push_back(speed[d]);
        c.counts.push_back(microbatch_shares(M, s));
        ok = ok && !c.counts.back().empty();
      }
      if (!ok) continue;
      auto time = [&](int g, int l) {
        double t = 0;
        for (std::size_t i = 0; i < groups[g].size(); ++i) {
          const int type = cluster.devices[groups[g][i]].type;
          t = std::max(t, c.counts[g][i] * (l * per_layer[type] + (g == P - 1 ? head[type] : 0.0)));
        }
        return t;
      };
      auto fits = [&](int g, int l) {
        const double need = static_policy.static_bytes(params_of(l, g == 0, g == P - 1),
                                                       static_cast<int>(groups[g].size()));
        for (int d : groups[g]) {
          const double cap = cluster.type_of(d).memory_bytes;
          if (need + static_policy.reserve_bytes(cap) > cap) {
            closest_static.offer(need + static_policy.reserve_bytes(cap), cap, [&] {
              return cluster.device_name(d) + " (" + cluster.type_of(d).name + ") would need " +
                     bytes_text(need + static_policy.reserve_bytes(cap)) + " of its " + bytes_text(cap) +
                     " for the weights, gradients and optimizer state of " + std::to_string(l) +
                     " layer(s) in a " + std::to_string(P) + "-stage layout";
            });
            return false;
          }
        }
        return true;
      };
      const std::vector<int> layers = balance_layers(L, P, time, fits);
      if (layers.empty()) continue;
      double work = 0, sum = 0, sync = 0;
      for (int g = 0; g < P; ++g) {
        const double t = time(g, layers[g]);
        work = std::max(work, t);
        sum += t;
        const double bytes = static_policy.sync_bytes_per_parameter() * static_cast<double>(params_of(layers[g], g == 0, g == P - 1));
        sync = std::max(sync, ring_sync_seconds(cluster, groups[g], bytes));
      }
      c.score = work + (sum - work) / M + sync;
      coarse.push_back(std::move(c));
    }
    std::sort(coarse.begin(), coarse.end(), [](const auto& a, const auto& b) { return a.score < b.score; });
    if (static_cast<int>(coarse.size()) > o.grouping_shortlist) coarse.resize(o.grouping_shortlist);

    // Fine pass: every schedule option on the shortlisted groupings, estimated.
    for (const GroupingCandidate& gc : coarse) {
      const int P = static_cast<int>(gc.groups.size());
      for (const SegmentOption& so : segment_options) {
        const UnitTimes& times = times_for(b, so);
        if (so.k > 1) {
          const auto& lengths = times.partition().lengths;
          if (b * *std::min_element(lengths.begin(), lengths.end()) < result.min_unit_tokens) continue;
        }
        {
          const MemoryPolicy policy{cluster.precision, {}};
          // Activation bytes of one unit per layer (mean over segments), kept whole or recomputed
          // (its input and K/V), and the head's extra (never recomputed).
          const sim::MemoryModel unit_memory(shape, {1, 1}, times.partition(), b, policy.memory_options());
          const sim::MemoryModel recomputed_memory(shape, {1, 1}, times.partition(), b,
                                                   {cluster.precision, spec::Recompute::stages({1, 1}), 1});
          double act_layer = 0, act_recomputed = 0, act_head = 0, after_b = 0;
          for (int j = 0; j < so.k; ++j) {
            act_layer += unit_memory.activation_bytes(0, j) / so.k;
            act_recomputed += recomputed_memory.activation_bytes(0, j) / so.k;
            act_head += (unit_memory.activation_bytes(1, j) - unit_memory.activation_bytes(0, j)) / so.k;
            after_b += unit_memory.held_for_weight_bytes(0, j) / so.k;
          }
          for (const FamilyOption& fo : families) {
            const schedule::ScheduleFamily& f = *fo.family;
            if (so.k > 1 && !f.sequence_level) continue;
            // With k = 1 a sequence family is its micro-batch twin, when that one is tried.
            if (so.k == 1 && !f.one_segment_twin.empty() && has_family(f.one_segment_twin)) continue;
            const int v = fo.chunks;
            // Units in flight on group g: the family's homogeneous limit (the estimate then uses the
            // heterogeneous limits), all of the busiest device's units without one (GPipe).
            // Fused-backward families get twice that off lock-step (heterogeneous_pipeline.h).
            const double slack = f.split_backward || gc.lockstep ? 1.0 : 2.0;
            const schedule::PipelineShape homogeneous{P, v, M, so.k};
            auto in_flight = [&](int g, int most) {
              if (!f.in_flight_limit) return static_cast<double>(most) * so.k * v;
              return slack * f.in_flight_limit(homogeneous, g);
            };
            std::vector<int> cap(P, L);
            for (int attempt = 0; attempt < 4; ++attempt) {
              // The fewest of its l layers group g must recompute to fit on every device (each one
              // keeps its input and K/V instead of its state, and the group then needs one layer's
              // rebuild as working set), or -1 if even all of them do not make it fit.
              // With the B/W split a recomputed layer's units hold, between B and W, what W needs
              // (as without recomputation): the larger of that and the kept input and K/V.
              const double recomputed_unit = f.split_backward ? std::max(act_recomputed, after_b) : act_recomputed;
              auto recompute_needed = [&](int g, int l) {
                if (l > cap[g]) return -1;
                const bool last = g == P - 1;
                const int most = *std::max_element(gc.counts[g].begin(), gc.counts[g].end());
                const double fixed = policy.static_bytes(params_of(l, g == 0, last), static_cast<int>(gc.groups[g].size()));
                for (int r = 0; r <= (o.recompute ? l : 0); ++r) {
                  const double need = fixed + in_flight(g, most) * ((l - r) * act_layer + r * recomputed_unit + (last ? act_head : 0.0)) +
                                      policy.working_bytes(shape, b, times.partition(), {1, g == 0, last, r > 0 ? 1 : 0});
                  const bool fits_all = std::all_of(gc.groups[g].begin(), gc.groups[g].end(), [&](int d) {
                    const double capacity = cluster.type_of(d).memory_bytes;
                    return need + policy.reserve_bytes(capacity) <= capacity;
                  });
                  if (fits_all) return r;
                }
                return -1;
              };
              auto per_mb = [&](int type, int l, int recomputed, bool last) {
                double t = 0;
                for (int j = 0; j < so.k; ++j) {
                  for (int kind = 0; kind < 3; ++kind) t += l * times.layer(type, kind, j) + (last ? times.head(type, kind, j) : 0.0);
                  t += recomputed * times.rebuild(type, j);
                  t += (f.split_backward ? 3 : 2) * times.action_overhead(type);  // per action
                }
                return t;
              };
              auto time = [&](int g, int l) {
                const int recomputed = std::max(0, recompute_needed(g, l));
                double t = 0;
                for (std::size_t i = 0; i < gc.groups[g].size(); ++i) {
                  t = std::max(t, gc.counts[g][i] * per_mb(cluster.devices[gc.groups[g][i]].type, l, recomputed, g == P - 1));
                }
                return t;
              };
              auto fits = [&](int g, int l) { return recompute_needed(g, l) >= 0; };
              const std::vector<int> layers = balance_layers(L, P, time, fits, v);
              if (layers.empty()) break;
              Candidate cand;
              PlanChoice& ch = cand.choice;
              ch.family = f.name;
              ch.chunks = v;
              ch.segments = so.k;
              ch.split = so.split;
              ch.microbatch_size = b;
              ch.num_microbatches = M;
              for (int g = 0; g < P; ++g) ch.groups.push_back({gc.groups[g], gc.counts[g]});
              ch.vstage_layers.assign(static_cast<std::size_t>(P) * v, 0);
              ch.recompute_layers.assign(static_cast<std::size_t>(P) * v, 0);
              for (int g = 0; g < P; ++g) {
                const std::vector<std::int32_t> held = ch.group_vstages(g);
                int recomputed = std::max(0, recompute_needed(g, layers[g]));  // over the group's chunks
                for (int c = 0; c < v; ++c) {
                  const int n = layers[g] / v + (c < layers[g] % v ? 1 : 0);
                  ch.vstage_layers[held[c]] = n;
                  ch.recompute_layers[held[c]] = std::min(n, recomputed);
                  recomputed -= ch.recompute_layers[held[c]];
                }
              }
              if (!ch.recomputes()) ch.recompute_layers.clear();
              cand.estimate = estimate_plan(planning, ch, times);
              ++result.estimated;
              if (cand.estimate.fits) {
                pool.push_back(std::move(cand));
                break;
              }
              // Over memory: give the group of the first device over its memory one layer less.
              for (const DevicePrediction& d : cand.estimate.devices) {
                if (d.total_bytes() > d.capacity_bytes) {
                  closest.offer(d.total_bytes(), d.capacity_bytes,
                                [&] { return ch.summary(cluster) + ": " + cand.estimate.over_memory; });
                  cap[d.group] = layers[d.group] - 1;
                  break;
                }
              }
            }
          }
        }
      }
    }
  }

  if (pool.empty()) {
    const std::string& why = closest.message.empty() ? closest_static.message : closest.message;
    throw Error("cannot plan: no layout fits in memory" + (why.empty() ? std::string() : "; the closest: " + why));
  }
  // Shortlist for simulation: the best estimate of each family first, then the best overall.
  std::sort(pool.begin(), pool.end(), [](const Candidate& a, const Candidate& b) {
    return a.estimate.step_seconds < b.estimate.step_seconds;
  });
  std::vector<const Candidate*> finals;
  std::set<std::string> chosen;
  auto take = [&](const Candidate& c) {
    if (static_cast<int>(finals.size()) >= o.simulate) return;
    if (chosen.insert(c.choice.summary(cluster)).second) finals.push_back(&c);
  };
  std::set<std::string> family_seen;
  for (const Candidate& c : pool) {
    if (family_seen.insert(c.choice.family).second) take(c);
  }
  for (const Candidate& c : pool) take(c);

  std::vector<Plan> plans;
  for (const Candidate* c : finals) {
    Plan plan;
    plan.choice = c->choice;
    plan.schedule = build_schedule(planning, plan.choice, planning.type_profiles);
    plan.prediction = simulate_plan(planning, plan.choice, plan.schedule);
    ++result.simulated;
    result.shortlist.push_back({plan.choice.summary(cluster), c->estimate.step_seconds, plan.prediction.step_seconds,
                                plan.prediction.over_memory});
    if (!plan.prediction.fits) {
      closest.offer(1.0, 1.0, [&] { return plan.choice.summary(cluster) + ": " + plan.prediction.over_memory; });
      continue;
    }
    plans.push_back(std::move(plan));
  }
  if (plans.empty()) {
    throw Error("cannot plan: every shortlisted layout exceeds a device's memory in simulation; the closest: " +
                closest.message);
  }
  std::sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) {
    return a.prediction.step_seconds < b.prediction.step_seconds;
  });
  if (static_cast<int>(plans.size()) > o.top) plans.resize(o.top);
  if (o.even) {
    // What the even plans really do: the same schedules on the real devices.
    for (Plan& p : plans) {
      result.assumed.push_back(p.prediction);
      p.prediction = simulate_plan(real, p.choice, p.schedule);
    }
  }
  result.plans = std::move(plans);
  result.seconds = monotonic_seconds() - start;
  return result;
}

}  // namespace plait::plan
