#include <gtest/gtest.h>

#include <algorithm>
#include <algorithm>
#include <cmath>

#include "plait/core/error.h"
#include "plait/plan/cluster_spec.h"
#include "plait/plan/plan_estimate.h"
#include "plait/plan/plan_report.h"
#include "plait/plan/plan_simulation.h"
#include "plait/plan/planner.h"
#include "plait/schedule/schedule_family.h"
#include "plait/spec/sequence_partition.h"
#include "test_files.h"

namespace plait::plan {
namespace {

// Two fast and two slow devices on one machine.
const char* kMixed = R"({
  "device_types": {"fast": {"tflops": 200, "memory_gib": 80}, "slow": {"tflops": 100, "memory_gib": 80},
                   "tiny": {"tflops": 200, "memory_gib": 9}},
  "machines": [{"name": "m", "devices": [{"type": "fast", "count": 2}, {"type": "slow", "count": 2}],
                "link": {"gbyte_per_s": 100, "latency_us": 5}}]})";

PlanningProblem problem(const std::string& cluster, const std::string& model, std::int64_t batch, std::int64_t seq) {
  return make_problem(read_cluster_spec(cluster), spec::resolve_model(model, seq), batch, seq);
}

// Work (micro-batches x layers) per device of a plan, indexed by device.
std::vector<double> work(const Plan& plan) {
  std::vector<double> out(64, 0.0);
  for (int g = 0; g < plan.choice.num_groups(); ++g) {
    int layers = 0;
    for (std::int32_t s : plan.choice.group_vstages(g)) layers += plan.choice.vstage_layers[s];
    for (std::size_t i = 0; i < plan.choice.groups[g].devices.size(); ++i) {
      out[plan.choice.groups[g].devices[i]] += plan.choice.groups[g].microbatches[i] * layers;
    }
  }
  return out;
}

// Faster devices get more work, every device is kept busy, and the plan beats the even layout
// that ignores the difference (predicted on the real devices).
TEST(Planner, GivesFastDevicesMoreWork) {
  const PlanningProblem p = problem(write_test_file("mixed.json", kMixed), "gpt-1.3b", 64, 2048);
  PlannerOptions o;
  o.simulate = 6;
  const PlannerResult r = plan_cluster(p, o);
  ASSERT_FALSE(r.plans.empty());
  const Plan& best = r.plans[0];
  EXPECT_TRUE(best.prediction.simulated);
  EXPECT_TRUE(best.prediction.fits);
  EXPECT_EQ(best.choice.rank_devices().size(), 4u);
  const std::vector<double> w = work(best);
  EXPECT_GT(std::min(w[0], w[1]), 1.5 * std::max(w[2], w[3])) << best.choice.summary(p.cluster);
  for (const DevicePrediction& d : best.prediction.devices) {
    EXPECT_GT(d.busy_seconds / best.prediction.step_seconds, 0.7) << p.cluster.device_name(d.device);
    EXPECT_LE(d.total_bytes(), d.capacity_bytes);
  }
  for (std::size_t i = 1; i < r.plans.size(); ++i) {
    EXPECT_GE(r.plans[i].prediction.step_seconds, best.prediction.step_seconds);  // best first
  }
  EXPECT_NEAR(best.prediction.tokens_per_second * best.prediction.step_seconds, 64.0 * 2048, 1e-6);
  o.even = true;
  const PlannerResult even = plan_cluster(p, o);
  ASSERT_FALSE(even.plans.empty());
  ASSERT_EQ(even.assumed.size(), even.plans.size());
  for (int g = 1; g < even.plans[0].choice.num_groups(); ++g) {
    EXPECT_EQ(even.plans[0].choice.groups[g].devices.size(), even.plans[0].choice.groups[0].devices.size());
  }
  EXPECT_GT(even.plans[0].prediction.step_seconds, 1.2 * best.prediction.step_seconds);
  // Every device was taken to be the median one (a slow one here): even layers, even shares.
  EXPECT_NE(even.reference.find("slow"), std::string::npos);
  for (const StageGroup& g : even.plans[0].choice.groups) {
    EXPECT_EQ(*std::max_element(g.microbatches.begin(), g.microbatches.end()),
              *std::min_element(g.microbatches.begin(), g.microbatches.end()));
  }
}

// A device with little memory holds what fits: the predictions stay within every capacity, and
// the plan it is in carries fewer layers per device than a plan for the same speeds without
// the cap would give it.
TEST(Planner, RespectsEveryDevicesMemory) {
  const PlanningProblem p = problem(write_test_file("capped.json", R"({
    "device_types": {"fast": {"tflops": 200, "memory_gib": 80}, "slow": {"tflops": 100, "memory_gib": 80},
                     "tiny": {"tflops": 200, "memory_gib": 9}},
    "machines": [{"name": "m", "devices": [{"type": "tiny"}, {"type": "fast"}, {"type": "slow", "count": 2}],
                  "link": {"gbyte_per_s": 100, "latency_us": 5}}]})"), "gpt-1.3b", 64, 2048);
  ASSERT_EQ(p.cluster.type_of(0).name, "tiny");
  PlannerOptions o;
  o.simulate = 6;
  const PlannerResult r = plan_cluster(p, o);
  for (const Plan& plan : r.plans) {
    for (const DevicePrediction& d : plan.prediction.devices) EXPECT_LE(d.total_bytes(), d.capacity_bytes);
  }
  const PlanChoice& c = r.plans[0].choice;
  int tiny_layers = 0;
  for (int g = 0; g < c.num_groups(); ++g) {
    if (std::find(c.groups[g].devices.begin(), c.groups[g].devices.end(), 0) == c.groups[g].devices.end()) continue;
    for (std::int32_t s : c.group_vstages(g)) tiny_layers += c.vstage_layers[s];
  }
  // 9 GiB minus the 2 GiB reserve holds the 2 + 4 bytes of weights and gradients per parameter and
  // the tiny device's share of the 12 bytes of optimizer state: its shard, which its group sizes by
  // the devices' memory (9 of 89 GiB beside an 80 GiB device), of at most
  // 7 GiB / ((6 + 12 x share) x 50.3M) layers.
  double share = 1;
  for (int g = 0; g < c.num_groups(); ++g) {
    for (std::size_t i = 0; i < c.groups[g].devices.size(); ++i) {
      if (c.groups[g].devices[i] == 0) share = c.shard_fraction(p.cluster, g, i, p.cluster.precision);
    }
  }
  EXPECT_LT(share, 0.5) << c.summary(p.cluster);  // a small shard, not an equal one
  const double layer_parameters = static_cast<double>(p.model.model.layer_parameters());
  EXPECT_LE(tiny_layers, 7.0 * (1 << 30) / ((6 + 12 * share) * layer_parameters)) << c.summary(p.cluster);
}

// The analytic estimate and the simulation predict who a device is and its static and reserved
// memory the same way (plan/device_memory.h); only busy time and activations are each's own.
TEST(Planner, EstimateAndSimulationAgreeOnStaticMemory) {
  const PlanningProblem p = problem(write_test_file("mixed.json", kMixed), "gpt-1.3b", 64, 2048);
  PlannerOptions o;
  o.simulate = 4;
  const PlannerResult r = plan_cluster(p, o);
  int compared = 0;
  for (const Plan& plan : r.plans) {
    if (!plan.prediction.simulated) continue;
    const PlanChoice& c = plan.choice;
    const UnitTimes times(p, p.type_profiles, c.microbatch_size,
                          plan_partition(p, c));
    const PlanPrediction e = estimate_plan(p, c, times);
    ASSERT_EQ(e.devices.size(), plan.prediction.devices.size());
    for (std::size_t i = 0; i < e.devices.size(); ++i) {
      const DevicePrediction &a = e.devices[i], &b = plan.prediction.devices[i];
      EXPECT_EQ(a.device, b.device);
      EXPECT_EQ(a.rank, b.rank);
      EXPECT_EQ(a.group, b.group);
      EXPECT_EQ(a.microbatches, b.microbatches);
      EXPECT_DOUBLE_EQ(a.capacity_bytes, b.capacity_bytes);
      EXPECT_DOUBLE_EQ(a.static_bytes, b.static_bytes);
      EXPECT_DOUBLE_EQ(a.reserve_bytes, b.reserve_bytes);
      ++compared;
    }
  }
  EXPECT_GE(compared, 4);
}

// Restricted searches do what they say.
TEST(Planner, RestrictedSearches) {
  const PlanningProblem p = problem(write_test_file("mixed.json", kMixed), "gpt-1.3b", 64, 2048);
  PlannerOptions o;
  o.simulate = 4;
  o.families = {"1f1b"};
  o.segments = false;
  for (const Plan& plan : plan_cluster(p, o).plans) {
    EXPECT_EQ(plan.choice.family, "1f1b");
    EXPECT_EQ(plan.choice.segments, 1);
  }
  // Without tensor parallelism the sequence family's plans are segmented (its k = 1 form is
  // 1f1b's schedule and loses to them here). The TP search may keep a k = 1 TP layout among the
  // runner-ups: a TP degree must divide every segment's tokens, a constraint the whole sequence
  // meets most easily.
  o.families = {"seq1f1b"};
  o.segments = true;
  o.tensor_parallel = {1};
  for (const Plan& plan : plan_cluster(p, o).plans) EXPECT_GT(plan.choice.segments, 1);
  o.tensor_parallel.clear();
  o.families.clear();
  o.device_types = {"slow"};
  // Every device a plan uses (a TP group's members too) is one of the two slow ones, and each
  // plan uses both: as two ranks, or as one TP group of two.
  for (const Plan& plan : plan_cluster(p, o).plans) {
    std::vector<int> used;
    for (const StageGroup& g : plan.choice.groups) {
      for (int lead : g.devices) {
        for (int d = lead; d < lead + g.tp; ++d) used.push_back(d);
      }
    }
    std::sort(used.begin(), used.end());
    EXPECT_EQ(used, (std::vector<int>{2, 3})) << plan.choice.summary(p.cluster);
  }
  o.microbatch_sizes = {4};
  for (const Plan& plan : plan_cluster(p, o).plans) EXPECT_EQ(plan.choice.microbatch_size, 4);
}

// The families of issue 25: named, every plan is one of them and a DualPipeV plan has M >= 2P
// (groupings it cannot run are ruled out, not thrown). In the default search they take their
// own simulation slots: the eight families' shortlist is exactly that of a search naming only
// the eight (so the newer ones never displace a better layout), and each family's best
// simulated step is reported.
TEST(Planner, NewFamiliesSearchedInTheirOwnSimulationSlots) {
  const PlanningProblem p = problem(write_test_file("mixed.json", kMixed), "gpt-1.3b", 64, 2048);
  PlannerOptions o;
  o.simulate = 4;
  o.families = {"looped-bfs", "interleaved-zb", "dualpipe-v", "v-min", "v-half", "v-zb"};
  const PlannerResult named = plan_cluster(p, o);
  ASSERT_FALSE(named.plans.empty());
  for (const Plan& plan : named.plans) {
    EXPECT_NE(std::find(o.families.begin(), o.families.end(), plan.choice.family), o.families.end());
  }
  // A global batch of 4 sequences of one each: M = 4, too few for DualPipeV on 3 or 4 groups.
  const PlanningProblem small = problem(write_test_file("mixed.json", kMixed), "gpt-1.3b", 4, 2048);
  o.families = {"dualpipe-v"};
  o.microbatch_sizes = {1};
  for (const Plan& plan : plan_cluster(small, o).plans) {
    EXPECT_GE(plan.choice.num_microbatches, 2 * static_cast<int>(plan.choice.groups.size())) << plan.choice.summary(p.cluster);
  }
  o.microbatch_sizes.clear();
  o.families = {"gpipe", "1f1b", "interleaved", "seq1f1b", "seq1f1b-i", "zb-h1", "zb-v", "seq-zb"};
  const PlannerResult eight = plan_cluster(p, o);
  o.families.clear();
  const PlannerResult all = plan_cluster(p, o);
  EXPECT_GT(all.estimated, eight.estimated);
  EXPECT_GT(all.simulated, eight.simulated);
  EXPECT_LE(all.simulated, eight.simulated + static_cast<std::size_t>(o.simulate_newer));
  // The eight's simulations are the same layouts, in the same order, with the same results.
  std::vector<PlannerResult::Shortlisted> of_the_eight;
  for (const auto& s : all.shortlist) {
    if (!schedule::schedule_family(s.summary.substr(0, s.summary.find(' '))).own_simulation_slots) of_the_eight.push_back(s);
  }
  ASSERT_EQ(of_the_eight.size(), eight.shortlist.size());
  for (std::size_t i = 0; i < eight.shortlist.size(); ++i) {
    EXPECT_EQ(of_the_eight[i].summary, eight.shortlist[i].summary);
    EXPECT_EQ(of_the_eight[i].simulated_step, eight.shortlist[i].simulated_step);
  }
  EXPECT_LE(all.plans[0].prediction.step_seconds, eight.plans[0].prediction.step_seconds);
  // Each family's best, best first; the newer ones marked, and some of them simulated.
  ASSERT_FALSE(all.family_best.empty());
  EXPECT_EQ(all.family_best.front().family, all.plans[0].choice.family);
  EXPECT_EQ(all.family_best.front().step_seconds, all.plans[0].prediction.step_seconds);
  bool newer = false;
  for (std::size_t i = 0; i < all.family_best.size(); ++i) {
    const auto& f = all.family_best[i];
    EXPECT_EQ(f.newer, schedule::schedule_family(f.family).own_simulation_slots) << f.family;
    if (i > 0) {
      EXPECT_GE(f.step_seconds, all.family_best[i - 1].step_seconds);
    }
    newer = newer || f.newer;
  }
  EXPECT_TRUE(newer) << "no newer family has a simulated plan within memory";
  const std::string report = format_result(p, all, false);
  EXPECT_NE(report.find("families   best simulated step of each: "), std::string::npos) << report;
}

// Segmented units are not cut below the smallest work a measured profile covers (Zorse's tables
// start at 512 tokens), or below --min-unit-tokens; without a limit, shorter units are planned.
TEST(Planner, KeepsSegmentedUnitsWithinTheMeasuredRange) {
  const PlanningProblem p = problem(shared_cluster("zorse-64gpu.json"), "llama-7b", 1024, 1024);
  PlannerOptions o;
  o.top = 5;
  o.simulate = 5;
  o.families = {"seq1f1b"};
  auto shortest_unit = [&](const Plan& plan) {
    const auto lengths = plan_partition(p, plan.choice).lengths;
    return plan.choice.microbatch_size * *std::min_element(lengths.begin(), lengths.end());
  };
  const PlannerResult measured = plan_cluster(p, o);
  EXPECT_EQ(measured.min_unit_tokens, 512);
  for (const Plan& plan : measured.plans) {
    if (plan.choice.segments > 1) {
      EXPECT_GE(shortest_unit(plan), 512);
    }
  }
  o.min_unit_tokens = 2048;
  const PlannerResult larger = plan_cluster(p, o);
  EXPECT_EQ(larger.min_unit_tokens, 2048);
  for (const Plan& plan : larger.plans) {
    if (plan.choice.segments > 1) {
      EXPECT_GE(shortest_unit(plan), 2048);
    }
  }
  EXPECT_LT(larger.estimated, measured.estimated);  // the limit removes layouts, not just plans
  o.min_unit_tokens = 0;
  const PlannerResult unlimited = plan_cluster(p, o);
  EXPECT_EQ(unlimited.min_unit_tokens, 0);
  EXPECT_GT(unlimited.estimated, measured.estimated);
}

std::string cannot_plan(const PlanningProblem& p, const PlannerOptions& o);

// The emulated CPU cluster with every device capped at 21.5 MiB (share/clusters/cpu4-recompute.json):
// nothing fits without recomputation. With it the planner recomputes per stage, only the layers a
// stage needs to fit (the best plans recompute every layer of three stages and none of the
// fourth's; a runner-up recomputes 1 of a stage's 2), and every prediction stays within the caps;
// the simulation charges the rebuilds. (The caps were 26.6 MiB while attention kept its
// probabilities: attention's memory is O(s) now, so the same point needs a smaller device.)
TEST(Planner, RecomputesPerStageOnlyWhereMemoryNeedsIt) {
  const PlanningProblem p = cpu4_problem("cpu4-recompute.json");
  PlannerOptions o;
  o.simulate = 12;
  o.top = 8;
  o.recompute = false;
  EXPECT_EQ(cannot_plan(p, o).rfind("cannot plan: no layout fits in memory", 0), 0u);
  o.recompute = true;
  const PlannerResult r = plan_cluster(p, o);
  ASSERT_FALSE(r.plans.empty());
  bool some_not = false, partly = false;
  for (const Plan& plan : r.plans) {
    const PlanChoice& c = plan.choice;
    ASSERT_TRUE(c.recomputes()) << c.summary(p.cluster);
    ASSERT_EQ(c.recompute_layers.size(), c.vstage_layers.size());
    for (std::size_t s = 0; s < c.vstage_layers.size(); ++s) {
      EXPECT_LE(c.recompute_layers[s], c.vstage_layers[s]);
      some_not = some_not || c.recompute_layers[s] == 0;
      partly = partly || (c.recompute_layers[s] > 0 && c.recompute_layers[s] < c.vstage_layers[s]);
    }
    for (const DevicePrediction& d : plan.prediction.devices) EXPECT_LE(d.total_bytes(), d.capacity_bytes);
    EXPECT_NE(c.summary(p.cluster).find(", recompute "), std::string::npos);
  }
  EXPECT_TRUE(some_not) << "every stage of every plan recomputes";
  EXPECT_TRUE(partly) << "no stage recomputes only some of its layers";
  // The rebuilds cost time: the same layout without recomputation is faster (and over memory).
  PlanChoice plain = r.plans[0].choice;
  plain.recompute_layers.clear();
  const PlanPrediction without = simulate_plan(p, plain, r.plans[0].schedule);
  EXPECT_LT(without.pipeline_seconds, r.plans[0].prediction.pipeline_seconds);
  EXPECT_FALSE(without.fits);
}

// The same cluster with a host tier on every device (share/clusters/cpu4-offload.json: 1 GiB at
// 16 GB/s): where a stage needed recomputation to fit, the planner may keep its activations on
// the host between F and B (schedule/activation_offload.h). Among its best plans is one that
// offloads activations, predicted (the simulator timing the copies) faster than the best plan
// without a host tier, and every device, host tier included, stays within its capacity. Which
// plan ranks first is not asserted: an optimizer-offload plan ties with it (2.418 vs 2.419 s), so
// the order of the two follows the last bits of fp32 sums and differs between builds (the
// sanitizer build ranks the optimizer-offload plan first).
TEST(Planner, OffloadsActivationsWhereAStageRecomputedToFit) {
  const PlanningProblem without = cpu4_problem("cpu4-recompute.json");
  const PlanningProblem with = cpu4_problem("cpu4-offload.json");
  PlannerOptions o;
  o.simulate = 12;
  o.top = 8;
  const PlannerResult before = plan_cluster(without, o);
  const PlannerResult after = plan_cluster(with, o);
  ASSERT_FALSE(before.plans.empty());
  ASSERT_FALSE(after.plans.empty());
  const double best_before = before.plans[0].prediction.step_seconds;
  const auto offloading = std::find_if(after.plans.begin(), after.plans.end(), [](const auto& plan) {
    return !plan.choice.offload_activations.empty();
  });
  ASSERT_NE(offloading, after.plans.end()) << "no plan offloads activations; best: "
                                           << after.plans[0].choice.summary(with.cluster);
  const PlanChoice& c = offloading->choice;
  EXPECT_NE(c.summary(with.cluster).find(", offload activations "), std::string::npos);
  EXPECT_LT(offloading->prediction.step_seconds, best_before)
      << c.summary(with.cluster) << " against " << before.plans[0].choice.summary(without.cluster);
  EXPECT_LE(after.plans[0].prediction.step_seconds, offloading->prediction.step_seconds);
  for (const DevicePrediction& d : offloading->prediction.devices) {
    EXPECT_LE(d.total_bytes(), d.capacity_bytes);
    EXPECT_LE(d.host_bytes, d.host_capacity_bytes);
  }
}

std::string cannot_plan(const PlanningProblem& p, const PlannerOptions& o) {
  try {
    plan_cluster(p, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(planned)";
}

// Unplannable requests say why in one line.
TEST(Planner, ExplainsWhyItCannotPlan) {
  const PlanningProblem big = problem(write_test_file("mixed.json", kMixed), "gpt-30b", 64, 2048);
  const std::string memory = cannot_plan(big, {});
  EXPECT_EQ(memory.rfind("cannot plan: no layout fits in memory; the closest: ", 0), 0u) << memory;
  EXPECT_NE(memory.find("GiB"), std::string::npos) << memory;
  EXPECT_EQ(memory.find('\n'), std::string::npos);
  const PlanningProblem p = problem(write_test_file("mixed.json", kMixed), "gpt-1.3b", 63, 2048);
  PlannerOptions o;
  o.microbatch_sizes = {2, 4};
  EXPECT_NE(cannot_plan(p, o).find("no micro-batch size tried divides the global batch of 63"), std::string::npos);
  o = {};
  o.device_types = {"gpu"};
  EXPECT_NE(cannot_plan(p, o).find("has no device type 'gpu' (it has fast, slow, tiny)"), std::string::npos);
  o = {};
  o.families = {"2f2b"};
  EXPECT_NE(cannot_plan(p, o).find("unknown schedule '2f2b'"), std::string::npos);
}

// Acceptance on Zorse's measurements (issue 5): 8 A100-40GB + 16 A10G + 16 V100-16GB + 24 T4,
// LLaMA-7B shape, 1M tokens per step at 1024 tokens: the plan beats the best single-type
// sub-cluster and the best plan with 1F1B and no segments. (4096 tokens: docs/planner.md.)
TEST(Planner, ZorseClusterBeatsHomogeneousAndOneFOneB) {
  const PlanningProblem p = problem(shared_cluster("zorse-64gpu.json"), "llama-7b", 1024, 1024);
  PlannerOptions o;
  o.top = 1;
  o.simulate = 8;
  const double best = plan_cluster(p, o).plans[0].prediction.tokens_per_second;
  double homogeneous = 0;
  for (const char* type : {"a100x40", "a10g", "v100x16", "t4"}) {
    PlannerOptions h = o;
    h.device_types = {type};
    homogeneous = std::max(homogeneous, plan_cluster(p, h).plans[0].prediction.tokens_per_second);
  }
  PlannerOptions f = o;
  f.families = {"1f1b"};
  f.segments = false;
  const double one_f_one_b = plan_cluster(p, f).plans[0].prediction.tokens_per_second;
  EXPECT_GT(best, 2.0 * homogeneous);
  EXPECT_GT(best, 1.05 * one_f_one_b);
}

}  // namespace
}  // namespace plait::plan
