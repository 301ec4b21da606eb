// Plans for packed documents (plan/plan_documents.h): memory for the worst cut of the drawn
// steps, the step time of the slowest step, and a layout that fits on average but not at its
// worst cut rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "plait/plan/plan_file.h"
#include "plait/plan/plan_report.h"
#include "plait/plan/plan_simulation.h"
#include "plait/plan/planner.h"
#include "test_files.h"

namespace plait::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string two_devices(double memory_gib) {
  char text[512];
  std::snprintf(text, sizeof text, R"({
    "device_types": {"gpu": {"tflops": 100, "memory_gib": %.6f}},
    "machines": [{"name": "m", "devices": [{"type": "gpu", "count": 2}],
                  "link": {"gbyte_per_s": 100, "latency_us": 5}}]})",
                memory_gib);
  return text;
}

PlanningProblem gpt2_problem(double memory_gib, bool documents) {
  PlanningProblem p = make_problem(read_cluster_spec(write_test_file("two.json", two_devices(memory_gib))),
                                   spec::resolve_model("gpt2-small", 2048), 8, 2048);
  if (documents) {
    DocumentPlanning d;
    d.distribution = data::parse_document_distribution("lognormal:300:1.5", "test");
    p.documents = std::make_shared<const DocumentLoads>(d, p.model.model, p.seq, p.global_batch);
  }
  return p;
}

PlannerOptions seq1f1b_options() {
  PlannerOptions o;
  o.families = {"seq1f1b"};
  o.microbatch_sizes = {1};
  o.recompute = false;
  o.shard = false;
  o.simulate = 8;
  o.top = 20;
  return o;
}

double most_bytes(const PlanPrediction& p) {
  double most = 0;
  for (const DevicePrediction& d : p.devices) most = std::max(most, d.total_bytes());
  return most;
}

const Plan* flops_plan(const PlannerResult& r) {
  for (const Plan& plan : r.plans) {
    if (plan.choice.segments > 1 && plan.choice.split == spec::SplitMethod::flops) return &plan;
  }
  return nullptr;
}

// A flops split cut per micro-batch from long-tailed documents: its segments, as long as the
// longest of any micro-batch, add up to more than the sequence, so the worst cut needs more
// memory than the nominal one; the step is the slowest drawn step's, below full causal rows (the
// documents' attention is a fraction of the triangle's) and at or above the same work spread
// equally over the micro-batches.
TEST(DocumentPlanning, PlansMemoryForTheWorstCutAndTimeForTheSlowestStep) {
  const PlanningProblem plain = gpt2_problem(80, false), packed = gpt2_problem(80, true);
  const PlannerResult r = plan_cluster(plain, seq1f1b_options());
  const Plan* x = flops_plan(r);
  ASSERT_NE(x, nullptr) << "no flops-split plan among " << r.plans.size();
  EXPECT_FALSE(x->prediction.documents);
  const PlanPrediction d = simulate_plan(packed, x->choice, x->schedule);
  ASSERT_TRUE(d.documents);
  const DocumentPrediction& doc = *d.documents;
  EXPECT_TRUE(doc.cuts);
  EXPECT_EQ(doc.steps, 8);
  EXPECT_EQ(doc.nominal_cut, plan_partition(plain, x->choice).lengths);
  ASSERT_EQ(doc.worst_cut.size(), doc.nominal_cut.size());
  EXPECT_GT(std::accumulate(doc.worst_cut.begin(), doc.worst_cut.end(), std::int64_t{0}), 2048);
  // Later segments grow where short documents make the work even along the row.
  bool longer = false;
  for (std::size_t i = 1; i < doc.worst_cut.size(); ++i) longer = longer || doc.worst_cut[i] > doc.nominal_cut[i];
  EXPECT_TRUE(longer);
  EXPECT_GE(doc.message_bytes, doc.nominal_message_bytes);
  EXPECT_GT(most_bytes(d), most_bytes(x->prediction));
  for (std::size_t i = 0; i < d.devices.size(); ++i) {
    EXPECT_GE(d.devices[i].activation_bytes, x->prediction.devices[i].activation_bytes);
    EXPECT_DOUBLE_EQ(d.devices[i].static_bytes, x->prediction.devices[i].static_bytes);
  }
  EXPECT_DOUBLE_EQ(doc.nominal_seconds, x->prediction.pipeline_seconds);
  EXPECT_LT(doc.worst_seconds, doc.nominal_seconds);
  EXPECT_GE(doc.worst_seconds, doc.mean_seconds);
  EXPECT_GE(doc.worst_seconds, doc.equal_seconds * (1 - 1e-12));
  EXPECT_GT(doc.max_over_mean, 1.0);
  EXPECT_DOUBLE_EQ(d.pipeline_seconds, doc.worst_seconds);
  const std::string text = format_plan(packed, {x->choice, d, x->schedule}, "p");
  EXPECT_NE(text.find("planned for the worst step"), std::string::npos) << text;
  EXPECT_NE(text.find("memory for the worst cut"), std::string::npos) << text;

  // An even split is not cut per micro-batch: its memory is the plan's, only its time changes.
  PlannerOptions even = seq1f1b_options();
  const PlannerResult all = plan_cluster(plain, even);
  for (const Plan& plan : all.plans) {
    if (plan.choice.segments < 2 || plan.choice.split != spec::SplitMethod::even) continue;
    const PlanPrediction e = simulate_plan(packed, plan.choice, plan.schedule);
    ASSERT_TRUE(e.documents);
    EXPECT_FALSE(e.documents->cuts);
    EXPECT_EQ(e.documents->worst_cut, e.documents->nominal_cut);
    EXPECT_DOUBLE_EQ(most_bytes(e), most_bytes(plan.prediction));
    break;
  }
}

// Devices with memory between the nominal cut's need and the worst cut's: the layout fits
// without documents, and with them it is over memory (rejected); the planner's plans for the
// documents all fit at their worst cut.
TEST(DocumentPlanning, RejectsALayoutThatFitsOnlyOnAverage) {
  const PlanningProblem plain = gpt2_problem(80, false), packed = gpt2_problem(80, true);
  const PlannerResult r = plan_cluster(plain, seq1f1b_options());
  const Plan* x = flops_plan(r);
  ASSERT_NE(x, nullptr);
  const double nominal = most_bytes(x->prediction);
  const double worst = most_bytes(simulate_plan(packed, x->choice, x->schedule));
  ASSERT_GT(worst, nominal);
  const double between = (nominal + worst) / 2 / kGiB;
  const PlanningProblem capped = gpt2_problem(between, false), capped_packed = gpt2_problem(between, true);
  EXPECT_TRUE(simulate_plan(capped, x->choice, x->schedule).fits);
  const PlanPrediction over = simulate_plan(capped_packed, x->choice, x->schedule);
  EXPECT_FALSE(over.fits);
  EXPECT_NE(over.over_memory.find("needs"), std::string::npos) << over.over_memory;

  // Planned without documents, some plans fit only at the nominal cut; planned with them, none of
  // those is chosen, and every plan fits at its worst cut.
  const PlannerResult without = plan_cluster(capped, seq1f1b_options());
  const PlannerResult with = plan_cluster(capped_packed, seq1f1b_options());
  ASSERT_FALSE(with.plans.empty());
  std::vector<std::string> only_on_average;
  for (const Plan& p : without.plans) {
    EXPECT_TRUE(p.prediction.fits);
    if (!simulate_plan(capped_packed, p.choice, p.schedule).fits) only_on_average.push_back(p.choice.summary(capped.cluster));
  }
  EXPECT_FALSE(only_on_average.empty());
  for (const Plan& p : with.plans) {
    ASSERT_TRUE(p.prediction.documents);
    EXPECT_TRUE(p.prediction.fits);
    for (const DevicePrediction& d : p.prediction.devices) EXPECT_LE(d.total_bytes(), d.capacity_bytes);
    const std::string summary = p.choice.summary(capped.cluster);
    EXPECT_EQ(std::find(only_on_average.begin(), only_on_average.end(), summary), only_on_average.end()) << summary;
  }

  // Tighter still, only tensor parallelism fits: its worst cuts are rounded to its degree, as the
  // runtime rounds them (sequence parallelism splits every unit's tokens over the group).
  const PlanningProblem tight = gpt2_problem(4.0, true);
  PlannerOptions tp = seq1f1b_options();
  tp.tensor_parallel = {1, 2};
  const PlannerResult t = plan_cluster(tight, tp);
  ASSERT_FALSE(t.plans.empty());
  for (const Plan& p : t.plans) {
    EXPECT_TRUE(p.prediction.fits);
    if (!p.choice.tensor_parallel() || !p.prediction.documents) continue;
    for (std::int64_t len : p.prediction.documents->worst_cut) EXPECT_EQ(len % 2, 0) << p.choice.summary(tight.cluster);
  }

  // The plan file packs documents and leaves the flops split to be cut per micro-batch.
  const nlohmann::json file = plan_file_json(capped_packed, *x, nullptr);
  EXPECT_EQ(file["data"]["packing"], "documents");
  EXPECT_EQ(file["train"]["segments"], x->choice.segments);
  EXPECT_EQ(file["parallel"]["split"], "flops");
}

}  // namespace
}  // namespace plait::plan
