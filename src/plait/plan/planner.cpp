#include "plait/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <limits>
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
#include "plait/plan/tensor_parallel_options.h"
#include "plait/schedule/activation_offload.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/memory_model.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::plan {

namespace {

struct FamilyOption {
  const schedule::ScheduleFamily* family;
  int chunks;
};

// One way a group runs: a TP degree (its ranks, tensor_parallel_options.h) and each rank's
// micro-batches (proportional to its speed).
struct GroupOption {
  TpOption tp;
  std::vector<int> counts;
};

// A grouping that survived the coarse pass, with each group's TP options and their ranks'
// micro-batch counts (t = 1 first when it can run: at least one micro-batch per device).
struct GroupingCandidate {
  double score;
  Grouping groups;
  std::vector<std::vector<GroupOption>> options;
  bool lockstep = false;  // every stage as wide, every device of one type
  bool needs_tp = false;  // some group cannot run at t = 1
  bool can_tp = false;    // some group can run at t > 1
  double tp_score = 0;    // the coarse score with TP where t = 1 cannot
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
  add_tensor_parallel_kinds(p);
  return p;
}

namespace {

// The search of plan_cluster, pass by pass (planner.h): what to try (devices, families,
// micro-batch sizes, segment options, recomputation), the speeds to plan for, then per
// micro-batch size a coarse pass over the groupings and a fine pass over every schedule option
// on the best of them, and last the simulation of the best estimates.
// A group's sharding options, cheapest in time first (docs/planner.md, "Sharding and offload"):
// the precision's default, level 1 where the group has data parallelism (moments sharded: a
// reduce-scatter and an all-gather move what an all-reduce moves), then each offloaded when every
// device of the group has a host tier (the copies cost time). Levels 2 and 3 are not tried: in
// plait's pipelines a stage's whole gradient buffer is in use from its first W to its last and its
// weights from its first use to its last, so neither lowers a device's peak below level 1's
// (spec/sharded_state.h), while both cost time. `choose` false: the default only (--no-shard).
std::vector<spec::ShardPolicy> shard_options(const ClusterSpec& cluster, const std::vector<int>& devices, bool choose) {
  const int n = static_cast<int>(devices.size());
  std::vector<spec::ShardPolicy> options = {default_shard(cluster.precision, n)};
  if (!choose) return options;
  if (n > 1 && options.front().level < 1) options.push_back({1, false});
  const bool host = std::all_of(devices.begin(), devices.end(), [&](int d) { return cluster.type_of(d).host_memory_bytes > 0; });
  if (host) {
    const std::size_t plain = options.size();
    for (std::size_t i = 0; i < plain; ++i) options.push_back({options[i].level, true});
  }
  return options;
}

// Whether a group's devices differ in memory (then its shards follow the memory).
bool mixed_memory(const ClusterSpec& cluster, const std::vector<int>& devices) {
  return std::any_of(devices.begin(), devices.end(), [&](int d) {
    return cluster.type_of(d).memory_bytes != cluster.type_of(devices.front()).memory_bytes;
  });
}

// Device `i`'s share of a group's stages under `shard` (PlanChoice::shard_fraction's rule).
double share_of(const ClusterSpec& cluster, const std::vector<int>& devices, std::size_t i, const spec::ShardPolicy& shard,
                bool memory_shares) {
  if (shard.level == 0) return 1.0;
  if (!memory_shares) return 1.0 / static_cast<double>(devices.size());
  double total = 0;
  for (int d : devices) total += cluster.type_of(d).memory_bytes;
  return cluster.type_of(devices[i]).memory_bytes / total;
}

class PlanSearch {
 public:
  PlanSearch(const PlanningProblem& real, const PlannerOptions& o)
      : real_(real), o_(o), cluster_(real.cluster), shape_(real.model.model), L_(shape_.layers),
        B_(real.global_batch), S_(real.seq) {}

  PlannerResult run() {
    const double start = monotonic_seconds();
    check_request();
    select_devices();
    select_families();
    select_options();
    select_tensor_parallel();
    choose_planning_speeds();
    limit_segmented_units();
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
      const int b = sizes_[i];
      report(o_.progress, "planning: finding the stage groupings (micro-batch size " + std::to_string(b) + ", " +
                              std::to_string(i + 1) + " of " + std::to_string(sizes_.size()) + ")", 0, 1);
      const std::vector<GroupingCandidate> coarse = coarse_pass(b);
      fine_pass(b, plain_shortlist(coarse), false);
      fine_pass(b, tp_shortlist(coarse), true);
    }
    result_.plans = simulate_shortlist(shortlist());
    result_.seconds = monotonic_seconds() - start;
    return std::move(result_);
  }

 private:
  struct SegmentOption {
    int k;
    spec::SplitMethod split;
  };
  // Bytes of one unit per layer (means over the segments): its activations kept whole, kept for
  // recomputation (its input and K/V), still held after its B (for W), and the LM head's extra.
  struct UnitActivations {
    double layer = 0, recomputed = 0, after_b = 0, head = 0;
    double communication = 0;  // TP: the buffers of the largest unit (spec::UnitMemory::communication)
    // The partition they are sized for: the plan's, or the worst cut of packed documents
    // (planned_memory_partition) at the degree's multiple.
    spec::SequencePartition held;
  };

  // Parameters of a stage of l layers, first and/or last (the model description's count).
  std::int64_t params_of(int l, bool first, bool last) const { return shape_.stage_parameters(l, first, last); }
  // ... on one rank of a TP group of t (spec/tensor_parallel_plan.h).
  std::int64_t params_of(int l, bool first, bool last, int t) const {
    return t == 1 ? params_of(l, first, last) : spec::tensor_parallel_stage_parameters(shape_, t, l, first, last);
  }

  bool has_family(const std::string& name) const {
    return o_.families.empty() || std::find(o_.families.begin(), o_.families.end(), name) != o_.families.end();
  }

  void check_request() const {
    if (B_ < 1) throw Error("cannot plan: the global batch must be at least one sequence");
    if (S_ < 1 || S_ > shape_.max_seq) {
      throw Error("cannot plan: sequence length " + std::to_string(S_) + " is outside the model's [1, " +
                  std::to_string(shape_.max_seq) + "]");
    }
  }

  // The devices of the requested types (all without a request).
  void select_devices() {
    for (const std::string& name : o_.device_types) {
      if (std::none_of(cluster_.types.begin(), cluster_.types.end(), [&](const DeviceType& t) { return t.name == name; })) {
        std::string names;
        for (const DeviceType& t : cluster_.types) names += (names.empty() ? "" : ", ") + t.name;
        throw Error("cannot plan: " + cluster_.path + " has no device type '" + name + "' (it has " + names + ")");
      }
    }
    for (int d = 0; d < cluster_.num_devices(); ++d) {
      const std::string& t = cluster_.type_of(d).name;
      if (o_.device_types.empty() || std::find(o_.device_types.begin(), o_.device_types.end(), t) != o_.device_types.end()) {
        devices_.push_back(d);
      }
    }
  }

  // Schedule families and their chunk counts (two for interleaving).
  void select_families() {
    for (const std::string& name : o_.families) {
      if (!schedule::find_schedule_family(name)) {
        throw Error("cannot plan: unknown schedule '" + name + "'; expected one of " + schedule::schedule_family_names());
      }
    }
    for (const schedule::ScheduleFamily& f : schedule::schedule_families()) {
      if (has_family(f.name)) families_.push_back({&f, f.fixed_chunks > 0 ? f.fixed_chunks : 2});
    }
  }

  // Micro-batch sizes and segment options.
  void select_options() {
    sizes_ = o_.microbatch_sizes;
    if (sizes_.empty()) {
      for (int b = 1; b <= 64; b *= 2) sizes_.push_back(b);
    }
    sizes_.erase(std::remove_if(sizes_.begin(), sizes_.end(), [&](int b) { return b < 1 || B_ % b != 0; }), sizes_.end());
    if (sizes_.empty()) {
      throw Error("cannot plan: no micro-batch size tried divides the global batch of " + std::to_string(B_) + " sequences");
    }
    segment_options_ = {{1, spec::SplitMethod::even}};
    const bool sequence_families = std::any_of(families_.begin(), families_.end(), [](const FamilyOption& f) {
      return f.family->sequence_level;
    });
    if (o_.segments && sequence_families) {
      for (int k : {2, 4, 8}) {
        if (S_ / k < 16) break;  // shorter segments only add per-unit overhead
        segment_options_.push_back({k, spec::SplitMethod::flops});
        segment_options_.push_back({k, spec::SplitMethod::even});
      }
    }
    if (devices_.empty()) throw Error("cannot plan: no devices selected");
  }

  // The TP degrees to try (--tp; else default_tensor_parallel_degrees).
  void select_tensor_parallel() {
    tp_degrees_ = o_.tensor_parallel;
    if (tp_degrees_.empty()) tp_degrees_ = default_tensor_parallel_degrees(cluster_);
    for (int t : tp_degrees_) {
      if (std::find(std::begin(kTensorParallelDegrees), std::end(kTensorParallelDegrees), t) == std::end(kTensorParallelDegrees)) {
        throw Error("cannot plan: tensor-parallel degree " + std::to_string(t) + " is not one of 1, 2, 4, 8");
      }
    }
    if (o_.even) tp_degrees_ = {1};  // the pp x dp baseline
  }

  // The speeds the plan is made for: the real ones, or (even) one reference profile for all.
  void choose_planning_speeds() {
    planning_ = real_;
    if (!o_.even) return;
    const UnitTimes times(real_, real_.type_profiles, 1, spec::even_partition(shape_, S_, 1));
    std::vector<std::pair<double, int>> by_speed;
    for (int d : devices_) {
      const int t = cluster_.devices[d].type;
      by_speed.push_back({times.layer(t, 0, 0) + times.layer(t, 1, 0) + times.layer(t, 2, 0), t});
    }
    std::sort(by_speed.begin(), by_speed.end());
    const int reference = by_speed[by_speed.size() / 2].second;
    for (sim::DeviceProfile& p : planning_.type_profiles) {
      const double memory = p.memory_bytes;
      const std::string name = p.name;
      p = real_.type_profiles[reference];
      p.memory_bytes = memory;
      p.name = name;
    }
    planning_.planning_profiles = planning_.type_profiles;
    result_.reference = cluster_.types[reference].name + " (the median device's type)";
  }

  // Segmented units below the smallest measured work would extrapolate the profile's fit into a
  // range where per-unit overheads dominate (an emulated CPU cluster ran 32-token units 2.5x
  // slower than its fit at 256 tokens predicted), so they are not planned.
  void limit_segmented_units() {
    result_.min_unit_tokens = o_.min_unit_tokens > 0 ? o_.min_unit_tokens : 0;
    if (o_.min_unit_tokens > 0) result_.min_unit_source = "--min-unit-tokens";
    if (o_.min_unit_tokens >= 0) return;
    for (int d : devices_) {
      const sim::DeviceProfile& p = planning_.type_profiles[cluster_.devices[d].type];
      if (p.measured && p.measured->shortest_seq > result_.min_unit_tokens) {
        result_.min_unit_tokens = p.measured->shortest_seq;
        result_.min_unit_source = "the shortest sequence measured for " + cluster_.type_of(d).name;
      }
    }
  }

  const UnitTimes& times_for(int b, const SegmentOption& so) {
    const auto key = std::make_tuple(b, so.k, static_cast<int>(so.split));
    auto it = times_cache_.find(key);
    if (it == times_cache_.end()) {
      it = times_cache_
               .emplace(key, UnitTimes(planning_, planning_.type_profiles, b, spec::cut_sequence(shape_, S_, {so.k, {}, so.split, 1})))
               .first;
    }
    return it->second;
  }

  // Coarse pass for micro-batch size b: every grouping ranked by its slowest stage's work, a
  // fill/drain term and its gradient synchronisation, with static memory only; the best
  // grouping_shortlist survive, with their devices' micro-batch counts.
  std::vector<GroupingCandidate> coarse_pass(int b) {
    const int M = static_cast<int>(B_ / b);
    const UnitTimes& base = times_for(b, segment_options_[0]);
    const int kinds = planning_.num_kinds();
    std::vector<double> per_layer(kinds), head(kinds);  // F + B + W of one micro-batch, per rank kind
    for (int t = 0; t < kinds; ++t) {
      for (int kind = 0; kind < 3; ++kind) {
        per_layer[t] += base.layer(t, kind, 0);
        head[t] += base.head(t, kind, 0);
      }
    }
    std::vector<double> speed(cluster_.num_devices());
    for (int d = 0; d < cluster_.num_devices(); ++d) speed[d] = 1.0 / per_layer[cluster_.devices[d].type];
    std::vector<Grouping> groupings = stage_groupings(cluster_, devices_, speed, std::min(o_.max_groups, L_));
    const std::string pass = "planning: the coarse pass over " + std::to_string(groupings.size()) +
                             " groupings (micro-batch size " + std::to_string(b) + ")";
    if (o_.even) {
      // A homogeneous layout: every stage as wide (pp x dp).
      groupings.erase(std::remove_if(groupings.begin(), groupings.end(),
                                     [](const Grouping& g) {
                                       return std::any_of(g.begin(), g.end(), [&](const auto& x) { return x.size() != g[0].size(); });
                                     }),
                      groupings.end());
    }
    result_.groupings += groupings.size();

    const MemoryPolicy static_policy{cluster_.precision, {}, cluster_.emulated, cluster_.grad_reduce};
    std::vector<GroupingCandidate> coarse;
    for (std::size_t gi = 0; gi < groupings.size(); ++gi) {
      report(o_.progress, pass, static_cast<std::int64_t>(gi), static_cast<std::int64_t>(groupings.size()));
      const Grouping& groups = groupings[gi];
      const int P = static_cast<int>(groups.size());
      GroupingCandidate c{0.0, groups, {}};
      c.lockstep = true;
      for (const auto& g : groups) {
        c.lockstep = c.lockstep && g.size() == groups[0].size();
        for (int d : g) c.lockstep = c.lockstep && cluster_.devices[d].type == cluster_.devices[groups[0][0]].type;
      }
      // Each group's TP options with their ranks' shares of the M micro-batches (a degree whose
      // ranks outnumber M is dropped: every rank needs one).
      bool ok = true;
      for (const auto& g : groups) {
        std::vector<GroupOption> options;
        for (TpOption& tp : tp_options(planning_, g, tp_degrees_)) {
          std::vector<double> s;
          for (int k : tp.kinds) s.push_back(1.0 / per_layer[k]);
          std::vector<int> counts = microbatch_shares(M, s);
          if (!counts.empty()) options.push_back({std::move(tp), std::move(counts)});
        }
        ok = ok && !options.empty();
        c.options.push_back(std::move(options));
      }
      if (!ok) continue;
      auto option_time = [&](int g, const GroupOption& o, int l) {
        double t = 0;
        for (std::size_t i = 0; i < o.tp.kinds.size(); ++i) {
          const int kind = o.tp.kinds[i];
          t = std::max(t, o.counts[i] * (l * per_layer[kind] + (g == P - 1 ? head[kind] : 0.0)));
        }
        return t;
      };
      const bool memory_shares = o_.shard && std::any_of(groups.begin(), groups.end(),
                                                         [&](const auto& g) { return mixed_memory(cluster_, g); });
      auto option_fits = [&](int g, const GroupOption& o, int l, bool report) {
        const std::int64_t params = params_of(l, g == 0, g == P - 1, o.tp.degree);
        // Static memory under the group's most memory-saving option (the fine pass picks).
        const std::vector<spec::ShardPolicy> options = shard_options(cluster_, o.tp.leads, o_.shard);
        for (std::size_t i = 0; i < o.tp.leads.size(); ++i) {
          const int d = o.tp.leads[i];
          double need = std::numeric_limits<double>::infinity();
          for (const spec::ShardPolicy& option : options) {
            need = std::min(need, static_policy.static_bytes(params, share_of(cluster_, o.tp.leads, i, option, memory_shares), option));
          }
          const double cap = cluster_.type_of(d).memory_bytes;
          if (need + static_policy.reserve_bytes(cap) > cap) {
            if (report) {
              closest_static_.offer(need + static_policy.reserve_bytes(cap), cap, [&] {
                return cluster_.device_name(d) + " (" + cluster_.type_of(d).name + ") would need " +
                       bytes_text(need + static_policy.reserve_bytes(cap)) + " of its " + bytes_text(cap) +
                       " for the weights, gradients and optimizer state of " + std::to_string(l) +
                       " layer(s) in a " + std::to_string(P) + "-stage layout";
              });
            }
            return false;
          }
        }
        return true;
      };
      // The coarse ranking keeps the first option that runs and holds the layers: t = 1 unless it
      // cannot (fewer micro-batches than devices, or the static state does not fit), then the
      // smallest t that can (pruning: the fine pass weighs every degree against the others).
      // The first option that holds the layers: plain, t = 1 only (the ranking without TP); with
      // TP, t = 1 unless it cannot (fewer micro-batches than devices, or the static state does
      // not fit), then the smallest t that can (the fine pass weighs every degree).
      auto score_of = [&](bool with_tp, double& score) {
        auto first_option = [&](int g, int l) -> const GroupOption* {
          const auto& options = c.options[static_cast<std::size_t>(g)];
          const std::size_t usable = with_tp ? options.size() : (options.front().tp.degree == 1 ? 1 : 0);
          for (std::size_t o = 0; o < usable; ++o) {
            if (option_fits(g, options[o], l, o + 1 == usable)) return &options[o];
          }
          return nullptr;
        };
        auto time = [&](int g, int l) {
          const GroupOption* o = first_option(g, l);
          return o ? option_time(g, *o, l) : std::numeric_limits<double>::infinity();
        };
        auto fits = [&](int g, int l) { return first_option(g, l) != nullptr; };
        const std::vector<int> layers = balance_layers(L_, P, time, fits);
        if (layers.empty()) return false;
        double work = 0, sum = 0, sync = 0;
        for (int g = 0; g < P; ++g) {
          const GroupOption* o = first_option(g, layers[g]);
          const double t = option_time(g, *o, layers[g]);
          work = std::max(work, t);
          sum += t;
          const double bytes = static_policy.sync_bytes_per_parameter() *
                               static_cast<double>(params_of(layers[g], g == 0, g == P - 1, o->tp.degree));
          sync = std::max(sync, ring_sync_seconds(cluster_, o->tp.leads, bytes));
        }
        score = work + (sum - work) / M + sync;
        return true;
      };
      const bool plain_ok = std::all_of(c.options.begin(), c.options.end(), [](const auto& o) { return o.front().tp.degree == 1; }) &&
                            score_of(false, c.score);
      c.can_tp = std::any_of(c.options.begin(), c.options.end(), [](const auto& o) { return o.size() > 1; }) &&
                 score_of(true, c.tp_score);
      if (!c.can_tp && plain_ok) c.tp_score = c.score;
      c.needs_tp = !plain_ok;
      if (plain_ok || c.can_tp) coarse.push_back(std::move(c));
    }
    std::sort(coarse.begin(), coarse.end(), [](const auto& a, const auto& b) { return a.score < b.score; });
    return coarse;
  }

  // Pruning that keeps the search within twice its time without TP (docs/planner.md): the plain
  // search is the one without TP, unchanged (the best grouping_shortlist groupings that run at
  // t = 1, each group at t = 1), so TP never displaces a layout it would have found; a second,
  // smaller search gives each group its best degree on the best tp_shortlist groupings that can
  // use TP at all (those that need it first ranked alike), and its layouts that use TP are
  // simulated beside the plain ones (PlannerOptions::simulate_tp).
  std::vector<GroupingCandidate> plain_shortlist(const std::vector<GroupingCandidate>& coarse) const {
    std::vector<GroupingCandidate> out;
    for (const GroupingCandidate& c : coarse) {
      if (static_cast<int>(out.size()) >= o_.grouping_shortlist) break;
      if (!c.needs_tp) out.push_back(c);
    }
    return out;
  }
  // (coarse is sorted by the plain score; the TP search takes the best by its own score)
  std::vector<GroupingCandidate> tp_shortlist(const std::vector<GroupingCandidate>& coarse) const {
    std::vector<const GroupingCandidate*> can;
    for (const GroupingCandidate& c : coarse) {
      if (c.can_tp) can.push_back(&c);
    }
    std::sort(can.begin(), can.end(), [](const auto* a, const auto* b) { return a->tp_score < b->tp_score; });
    std::vector<GroupingCandidate> out;
    for (std::size_t i = 0; i < can.size() && static_cast<int>(i) < o_.tp_grouping_shortlist; ++i) out.push_back(*can[i]);
    return out;
  }

  // Fine pass for micro-batch size b: every segment option and family on the shortlisted
  // groupings, estimated (recomputing per stage as memory needs, each stage at its best TP
  // degree when `tp`); layouts within memory join the pool.
  void fine_pass(int b, const std::vector<GroupingCandidate>& coarse, bool tp) {
    const std::string pass = "planning: estimating every schedule option on the best " + std::to_string(coarse.size()) +
                             " groupings" + (tp ? " with tensor parallelism" : "") + " (micro-batch size " +
                             std::to_string(b) + ")";
    for (std::size_t gi = 0; gi < coarse.size(); ++gi) {
      report(o_.progress, pass, static_cast<std::int64_t>(gi), static_cast<std::int64_t>(coarse.size()));
      const GroupingCandidate& gc = coarse[gi];
      for (const SegmentOption& so : segment_options_) {
        const UnitTimes& times = times_for(b, so);
        const auto& lengths = times.partition().lengths;
        if (so.k > 1) {
          if (b * *std::min_element(lengths.begin(), lengths.end()) < result_.min_unit_tokens) continue;
        }
        const MemoryPolicy policy{cluster_.precision, {}, cluster_.emulated, cluster_.grad_reduce};
        // Activation bytes of one unit per layer (mean over segments), kept whole or recomputed
        // (its input and K/V), and the head's extra (never recomputed), per TP degree; a degree
        // must divide every segment's tokens (sequence parallelism).
        std::map<int, UnitActivations> acts;
        for (int t : tp_degrees_) {
          if (std::any_of(lengths.begin(), lengths.end(), [t](std::int64_t len) { return len % t != 0; })) continue;
          const std::vector<int> tp{t};
          // With packed documents cut per micro-batch: the worst cut at this degree's multiple.
          const spec::SequencePartition held = planned_memory_partition(planning_, b, times.partition(), t);
          const sim::MemoryModel unit_memory(shape_, {1, 1}, held, b, policy.memory_options(1, tp));
          const sim::MemoryModel recomputed_memory(shape_, {1, 1}, held, b,
                                                   {cluster_.precision, spec::Recompute::stages({1, 1}), 1, tp});
          UnitActivations& act = acts[t];
          for (int j = 0; j < so.k; ++j) {
            act.layer += unit_memory.activation_bytes(0, j) / so.k;
            act.recomputed += recomputed_memory.activation_bytes(0, j) / so.k;
            act.head += (unit_memory.activation_bytes(1, j) - unit_memory.activation_bytes(0, j)) / so.k;
            act.after_b += unit_memory.held_for_weight_bytes(0, j) / so.k;
          }
          act.communication = unit_memory.communication_bytes(1);
          act.held = held;
        }
        for (const FamilyOption& fo : families_) {
          const schedule::ScheduleFamily& f = *fo.family;
          if (so.k > 1 && !f.sequence_level) continue;
          // With k = 1 a sequence family is its micro-batch twin, when that one is tried.
          if (so.k == 1 && !f.one_segment_twin.empty() && has_family(f.one_segment_twin)) continue;
          estimate_option(b, gc, so, times, policy, acts, fo, !tp);
        }
      }
    }
  }

  // How group g keeps l layers with one TP option: the option's index, its sharding option and
  // recomputed layers (-1: does not fit), and the group's time.
  struct Keeping {
    int option = -1, shard = -1, recompute = -1;
    double time = std::numeric_limits<double>::infinity();
    bool offload = false;  // the group's activations go to the host tier between F and B
  };

  // One schedule option on one grouping: balance the layers against time and memory (each group
  // at the TP degree that fits with the least time, with the fewest recomputed layers that fit),
  // estimate, and when a device is over its memory retry with one layer less on its group (4
  // attempts).
  // plain: every group at t = 1 (the search without TP); else each group at its best degree, the
  // layouts that use TP kept in their own pool.
  void estimate_option(int b, const GroupingCandidate& gc, const SegmentOption& so, const UnitTimes& times,
                       const MemoryPolicy& policy, const std::map<int, UnitActivations>& acts, const FamilyOption& fo,
                       bool plain) {
    const schedule::ScheduleFamily& f = *fo.family;
    const int P = static_cast<int>(gc.groups.size()), M = static_cast<int>(B_ / b), v = fo.chunks;
    // Units in flight on group g: the family's homogeneous limit (the estimate then uses the
    // heterogeneous limits), all of the busiest device's units without one (GPipe).
    // Fused-backward families get twice that off lock-step (heterogeneous_pipeline.h).
    const double slack = f.split_backward || gc.lockstep ? 1.0 : 2.0;
    const schedule::PipelineShape homogeneous{P, v, M, so.k};
    // A family's own constraint on the shape (DualPipeV: M >= 2P) rules the option out.
    if (!schedule::unsupported_reason(f, homogeneous).empty()) return;
    auto in_flight = [&](int g, int most) {
      if (!f.in_flight_limit) return static_cast<double>(most) * so.k * v;
      return slack * f.in_flight_limit(homogeneous, g);
    };
    std::vector<int> cap(P, L_);
    const bool memory_shares = o_.shard && std::any_of(gc.groups.begin(), gc.groups.end(),
                                                       [&](const auto& g) { return mixed_memory(cluster_, g); });
    auto per_mb = [&](int kind, int l, int recomputed, bool last) {
      double t = 0;
      for (int j = 0; j < so.k; ++j) {
        for (int k = 0; k < 3; ++k) t += l * times.layer(kind, k, j) + (last ? times.head(kind, k, j) : 0.0);
        t += recomputed * times.rebuild(kind, j);
        t += (f.split_backward ? 3 : 2) * times.action_overhead(kind);  // per action
      }
      return t;
    };
    // Group g holding l layers with option o: the first sharding option (shard_options: cheapest
    // in time first) and the fewest recomputed layers that fit (each one keeps its input and K/V
    // instead of its state, and the group then needs one layer's rebuild as working set),
    // preferring any sharding option to recomputing a layer (offload copies a stage's shard once
    // per step; recomputation re-runs a layer's forward for every micro-batch).
    // The option's time without recomputation: a lower bound of its time with any.
    auto least_time = [&](int g, int l, const GroupOption& opt) {
      double time = 0;
      for (std::size_t i = 0; i < opt.tp.kinds.size(); ++i) {
        time = std::max(time, opt.counts[i] * per_mb(opt.tp.kinds[i], l, 0, g == P - 1));
      }
      return time;
    };
    auto keeping_with = [&](int g, int l, int o, double better_than) -> Keeping {
      const GroupOption& opt = gc.options[static_cast<std::size_t>(g)][static_cast<std::size_t>(o)];
      const auto act_it = acts.find(opt.tp.degree);
      if (l > cap[g] || act_it == acts.end()) return {};
      // Pruning (exact): an option that cannot beat the best one found is not sized for memory.
      if (least_time(g, l, opt) >= better_than) return {};
      const UnitActivations& act = act_it->second;
      // With the B/W split a recomputed layer's units hold, between B and W, what W needs (as
      // without recomputation): the larger of that and the kept input and K/V.
      const double recomputed_unit = f.split_backward ? std::max(act.recomputed, act.after_b) : act.recomputed;
      const bool last = g == P - 1;
      const int most = *std::max_element(opt.counts.begin(), opt.counts.end());
      const std::int64_t params = params_of(l, g == 0, last, opt.tp.degree);
      const std::vector<spec::ShardPolicy> options = shard_options(cluster_, opt.tp.leads, o_.shard);
      // Activation offload (schedule/activation_offload.h) where every device has a host tier: at
      // most kOffloadResidentUnits units stay on the device, the rest wait on the host. Tried
      // after the sharding options and before recomputing a layer more, when a unit's copy at the
      // slowest host link takes no longer than the stage's mean action (it hides under the next
      // action; the simulator then times the copies and any stall exactly).
      double host_link = std::numeric_limits<double>::infinity();
      for (int d : opt.tp.leads) host_link = std::min(host_link, cluster_.type_of(d).host_memory_bytes > 0 ? cluster_.type_of(d).host_bytes_per_second : 0.0);
      for (int r = 0; r <= (o_.recompute ? l : 0); ++r) {
        const double unit = (l - r) * act.layer + r * recomputed_unit + (last ? act.head : 0.0);
        double action = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < opt.tp.kinds.size(); ++i) {
          action = std::min(action, per_mb(opt.tp.kinds[i], l, r, last) / ((f.split_backward ? 3.0 : 2.0) * so.k));
        }
        const bool can_offload = o_.shard && host_link > 0 && unit / host_link <= action;
        for (bool offload : {false, true}) {
          if (offload && !can_offload) continue;
          const double units = offload ? std::min<double>(in_flight(g, most), schedule::kOffloadResidentUnits)
                                       : in_flight(g, most);
          const double host_units = offload ? (in_flight(g, most) - units) * unit : 0.0;
          const double dynamic = units * unit + act.communication +
                                 policy.working_bytes(shape_, b, act.held, {1, g == 0, last, r > 0 ? 1 : 0, opt.tp.degree});
          for (std::size_t k = 0; k < options.size(); ++k) {
            bool ok = true;
            for (std::size_t i = 0; i < opt.tp.leads.size() && ok; ++i) {
              const int d = opt.tp.leads[i];
              const double share = share_of(cluster_, opt.tp.leads, i, options[k], memory_shares);
              const double capacity = cluster_.type_of(d).memory_bytes;
              ok = policy.static_bytes(params, share, options[k]) + dynamic + policy.reserve_bytes(capacity) <= capacity &&
                   policy.host_bytes(params, share, options[k]) + host_units <= cluster_.type_of(d).host_memory_bytes;
            }
            if (ok) {
              double time = 0;
              for (std::size_t i = 0; i < opt.tp.kinds.size(); ++i) {
                time = std::max(time, opt.counts[i] * per_mb(opt.tp.kinds[i], l, r, last));
              }
              return {o, static_cast<int>(k), r, time, offload};
            }
          }
        }
      }
      return {};
    };
    // The option with the least time that fits (memoised: the layer fill asks many times).
    std::vector<std::vector<Keeping>> memo;
    auto keeping = [&](int g, int l) -> Keeping {
      Keeping& m = memo[static_cast<std::size_t>(g)][static_cast<std::size_t>(l)];
      if (m.option == -2) {
        m = {};
        const auto& options = gc.options[static_cast<std::size_t>(g)];
        const int usable = plain ? (options.front().tp.degree == 1 ? 1 : 0) : static_cast<int>(options.size());
        for (int o = 0; o < usable; ++o) {
          const Keeping k = keeping_with(g, l, o, m.time);
          if (k.option >= 0 && k.time < m.time) m = k;
        }
      }
      return m;
    };
    auto time = [&](int g, int l) { return keeping(g, l).time; };
    auto fits = [&](int g, int l) { return keeping(g, l).option >= 0; };
    for (int attempt = 0; attempt < 4; ++attempt) {
      memo.assign(static_cast<std::size_t>(P), std::vector<Keeping>(static_cast<std::size_t>(L_) + 1, Keeping{-2}));
      const std::vector<int> layers = balance_layers(L_, P, time, fits, v);
      if (layers.empty()) break;
      Candidate cand;
      PlanChoice& ch = cand.choice;
      ch.family = f.name;
      ch.chunks = v;
      ch.segments = so.k;
      ch.split = so.split;
      ch.microbatch_size = b;
      ch.num_microbatches = M;
      std::vector<Keeping> kept;
      for (int g = 0; g < P; ++g) {
        kept.push_back(keeping(g, layers[g]));
        const GroupOption& opt = gc.options[static_cast<std::size_t>(g)][static_cast<std::size_t>(kept[g].option)];
        ch.groups.push_back({opt.tp.leads, opt.counts, opt.tp.degree});
      }
      ch.tp_notes = tp_notes(gc, layers, keeping_with, kept);
      // Each group's cheapest sharding option that fits its layers; recorded when one differs
      // from the precision's default or shards follow the devices' memory, so plans that need
      // neither read as before.
      ch.memory_shares = memory_shares;
      bool recorded = false;
      for (int g = 0; g < P; ++g) {
        const spec::ShardPolicy chosen = shard_options(cluster_, ch.groups[g].devices, o_.shard)[static_cast<std::size_t>(
            std::max(0, kept[g].shard))];
        ch.shard.push_back(chosen);
        recorded = recorded || !(chosen == default_shard(cluster_.precision, static_cast<int>(ch.groups[g].devices.size()))) ||
                   (memory_shares && chosen.level > 0);
      }
      if (!recorded) {
        ch.shard.clear();
        ch.memory_shares = false;
      }
      ch.vstage_layers.assign(static_cast<std::size_t>(P) * v, 0);
      ch.recompute_layers.assign(static_cast<std::size_t>(P) * v, 0);
      for (int g = 0; g < P; ++g) {
        const std::vector<std::int32_t> held = ch.group_vstages(g);
        int recomputed = std::max(0, kept[g].recompute);  // over the group's chunks
        for (int c = 0; c < v; ++c) {
          const int n = layers[g] / v + (c < layers[g] % v ? 1 : 0);
          ch.vstage_layers[held[c]] = n;
          ch.recompute_layers[held[c]] = std::min(n, recomputed);
          recomputed -= ch.recompute_layers[held[c]];
        }
      }
      if (!ch.recomputes()) ch.recompute_layers.clear();
      for (int g = 0; g < P; ++g) ch.offload_activations.push_back(kept[g].offload);
      if (std::none_of(kept.begin(), kept.end(), [](const Keeping& k) { return k.offload; })) ch.offload_activations.clear();
      cand.estimate = estimate_plan(planning_, ch, times);
      ++result_.estimated;
      if (cand.estimate.fits) {
        const bool newer = o_.families.empty() && f.own_simulation_slots;  // shortlist()
        if (plain) {
          (newer ? newer_pool_ : pool_).push_back(std::move(cand));
        } else if (ch.tensor_parallel()) {
          (newer ? newer_pool_ : tp_pool_).push_back(std::move(cand));
        }
        return;
      }
      // Over memory: give the group of the first device over its memory one layer less.
      for (const DevicePrediction& d : cand.estimate.devices) {
        if (d.total_bytes() > d.capacity_bytes) {
          closest_.offer(d.total_bytes(), d.capacity_bytes,
                         [&] { return ch.summary(cluster_) + ": " + cand.estimate.over_memory; });
          cap[d.group] = layers[d.group] - 1;
          break;
        }
      }
    }
  }

  // Why each group runs the TP degree it does: the other degrees' estimated stage times at the
  // same layers, relative to the chosen one ("t=1 (t=2 +31%, t=4 +78%, t=8 does not fit)"), or
  // why no other degree applies.
  template <class KeepingWith>
  std::vector<std::string> tp_notes(const GroupingCandidate& gc, const std::vector<int>& layers, const KeepingWith& keeping_with,
                                    const std::vector<Keeping>& kept) const {
    std::vector<std::string> notes;
    char buf[64];
    for (std::size_t g = 0; g < gc.options.size(); ++g) {
      const auto& options = gc.options[g];
      const GroupOption& chosen = options[static_cast<std::size_t>(kept[g].option)];
      std::string note = "t=" + std::to_string(chosen.tp.degree);
      std::string others;
      for (int o = 0; o < static_cast<int>(options.size()); ++o) {
        if (o == kept[g].option) continue;
        const Keeping k = keeping_with(static_cast<int>(g), layers[g], o, std::numeric_limits<double>::infinity());
        others += others.empty() ? "" : ", ";
        others += "t=" + std::to_string(options[static_cast<std::size_t>(o)].tp.degree);
        if (k.option < 0) {
          others += " does not fit";
        } else {
          std::snprintf(buf, sizeof buf, " %+.0f%%", 100.0 * (k.time / kept[g].time - 1.0));
          others += buf;
        }
      }
      if (!others.empty()) {
        note += " (stage time at " + others + ")";
      } else if (gc.groups[g].size() == 1) {
        note += " (one device)";
      } else if (tp_degrees_.size() > 1) {
        note += " (no other degree applies: t devices of one type in one machine, t dividing its devices of that type, "
                "heads, kv_heads, ffn and every segment's tokens, at most as many TP groups as micro-batches)";
      }
      notes.push_back(note);
    }
    return notes;
  }

  // The estimates to simulate: of the layouts without TP the best of each family first, then the
  // best overall (simulate of them); then the same of the newer families' layouts, with TP or
  // without (simulate_newer), and of the others' layouts with TP (simulate_tp).
  // Pruning of the default search (issue 25: fourteen families within 2x of the eight's search
  // time): the newer families are estimated beside the eight on the same shortlisted groupings,
  // but their layouts are simulated in slots of their own. In one shared list the best of each of
  // fourteen families took 14 of the 16 slots and pushed out layouts that simulated better than
  // any newer one (cpu4-emulated: 1.945 s chosen against the eight's 1.938 s); now the eight's
  // 16 are exactly the search without the newer families, so it never finds a worse plan, and
  // the newer families add simulate_newer simulations and their estimates (the TP search's
  // simulate_tp are likewise the eight's). A search that names
  // families (--schedule) simulates them all in the one list, as before.
  std::vector<const Candidate*> shortlist() {
    if (pool_.empty() && newer_pool_.empty() && tp_pool_.empty()) {
      const std::string& why = closest_.message.empty() ? closest_static_.message : closest_.message;
      throw Error("cannot plan: no layout fits in memory" + (why.empty() ? std::string() : "; the closest: " + why));
    }
    std::vector<const Candidate*> finals;
    std::set<std::string> chosen;
    for (auto [pool, most_of_pool] : {std::pair{&pool_, o_.simulate}, std::pair{&newer_pool_, o_.simulate_newer},
                                      std::pair{&tp_pool_, o_.simulate_tp}}) {
      const int most = most_of_pool;  // (a lambda may not capture a structured binding before clang 16)
      std::sort(pool->begin(), pool->end(), [](const Candidate& a, const Candidate& b) {
        return a.estimate.step_seconds < b.estimate.step_seconds;
      });
      const std::size_t first = finals.size();
      auto take = [&](const Candidate& c) {
        if (static_cast<int>(finals.size() - first) >= most) return;
        if (chosen.insert(c.choice.summary(cluster_)).second) finals.push_back(&c);
      };
      std::set<std::string> family_seen;
      for (const Candidate& c : *pool) {
        if (family_seen.insert(c.choice.family).second) take(c);
      }
      for (const Candidate& c : *pool) take(c);
    }
    return finals;
  }

  // Schedules and simulates the shortlist; the plans within memory, best first (top of them).
  std::vector<Plan> simulate_shortlist(const std::vector<const Candidate*>& finals) {
    std::vector<Plan> plans;
    for (std::size_t i = 0; i < finals.size(); ++i) {
      report(o_.progress, "planning: scheduling and simulating the best " + std::to_string(finals.size()) + " estimates",
             static_cast<std::int64_t>(i), static_cast<std::int64_t>(finals.size()));
      const Candidate* c = finals[i];
      Plan plan;
      plan.choice = c->choice;
      plan.schedule = build_schedule(planning_, plan.choice, planning_.type_profiles);
      plan.prediction = simulate_plan(planning_, plan.choice, plan.schedule);
      ++result_.simulated;
      result_.shortlist.push_back({plan.choice.summary(cluster_), c->estimate.step_seconds,
                                   plan.prediction.step_seconds, plan.prediction.over_memory});
      if (!plan.prediction.fits) {
        closest_.offer(1.0, 1.0, [&] { return plan.choice.summary(cluster_) + ": " + plan.prediction.over_memory; });
        continue;
      }
      plans.push_back(std::move(plan));
    }
    if (plans.empty()) {
      throw Error("cannot plan: every shortlisted layout exceeds a device's memory in simulation; the closest: " +
                  closest_.message);
    }
    std::sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) {
      return a.prediction.step_seconds < b.prediction.step_seconds;
    });
    for (const Plan& p : plans) {  // best first, so each family's first is its best
      auto& best = result_.family_best;
      if (std::none_of(best.begin(), best.end(), [&](const auto& b) { return b.family == p.choice.family; })) {
        best.push_back({p.choice.family, p.prediction.step_seconds, schedule::schedule_family(p.choice.family).own_simulation_slots});
      }
    }
    if (static_cast<int>(plans.size()) > o_.top) plans.resize(o_.top);
    if (o_.even) {
      // What the even plans really do: the same schedules on the real devices.
      for (Plan& p : plans) {
        result_.assumed.push_back(p.prediction);
        p.prediction = simulate_plan(real_, p.choice, p.schedule);
      }
    }
    return plans;
  }

  const PlanningProblem& real_;
  const PlannerOptions& o_;
  const ClusterSpec& cluster_;
  const spec::ModelSpec& shape_;
  const int L_;
  const std::int64_t B_, S_;
  std::vector<int> devices_;
  std::vector<FamilyOption> families_;
  std::vector<int> sizes_;
  std::vector<SegmentOption> segment_options_;
  std::vector<int> tp_degrees_;
  PlanningProblem planning_;
  PlannerResult result_;
  // The closest layouts to fitting: those over memory with their activations (estimated or
  // simulated), else those whose weights and optimizer state alone do not fit.
  Closest closest_, closest_static_;
  std::vector<Candidate> pool_, newer_pool_, tp_pool_;  // estimates within memory (shortlist)
  std::map<std::tuple<int, int, int>, UnitTimes> times_cache_;  // (b, k, split)
};

}  // namespace

PlannerResult plan_cluster(const PlanningProblem& real, const PlannerOptions& o) { return PlanSearch(real, o).run(); }

double planner_memory_bytes(int devices) {
  const double n = devices;
  return 96.0 * 1024 * 1024 + 200.0 * 1024 * n + 2 * 16 * n * n;
}

}  // namespace plait::plan
