// The planner's tensor parallelism (plan/tensor_parallel_options.h, docs/planner.md): it gives a
// stage t > 1 where the machine's link is fast and the batch has too few micro-batches for every
// device, keeps t = 1 over a slow link and says why; a TP plan file round-trips, and plait train
// builds it, one degree per stage.
#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/plan/plan_file.h"
#include "plait/plan/plan_simulation.h"
#include "plait/plan/planner.h"
#include "plait/plan/tensor_parallel_options.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "test_files.h"

namespace plait::plan {
namespace {

// One machine of 8 GPUs of a sustained 100 TFLOP/s (no fixed cost per layer, so 1/t of the work
// takes 1/t of the time: only the collectives make TP dear), joined at `link`.
std::string machine_of_8(const std::string& name, const std::string& link) {
  return write_test_file(name, R"({
    "device_types": {"gpu": {"tflops": 100, "memory_gib": 80}},
    "machines": [{"name": "m", "devices": [{"type": "gpu", "count": 8}], "link": )" + link + R"(}]})");
}

// 4 sequences of 2048 tokens on 8 GPUs: at micro-batch 1 there are 4 micro-batches, so a stage of
// t = 1 ranks holds at most 4 devices and the pipeline 2 such stages with a large bubble. Over
// NVLink-class links the planner uses TP (one stage of TP groups, no bubble); over a 1 GB/s link
// the collectives (4 x 2048 x 2048 x 2 bytes per layer and pass) cost more than the bubble saves,
// and it keeps t = 1 (a pipeline of single devices).
TEST(TensorParallelPlanner, UsesTpOverFastLinksAndNotOverSlowOnes) {
  auto plan = [](const std::string& cluster) {
    const PlanningProblem p = make_problem(read_cluster_spec(cluster), spec::resolve_model("gpt-1.3b", 2048), 4, 2048);
    PlannerOptions o;
    o.simulate = 6;
    o.microbatch_sizes = {1};
    o.segments = false;
    return std::pair{p, plan_cluster(p, o)};
  };
  const auto [fast_problem, fast] = plan(machine_of_8("fast8.json", R"({"gbyte_per_s": 240, "latency_us": 5})"));
  ASSERT_FALSE(fast.plans.empty());
  const PlanChoice& f = fast.plans[0].choice;
  EXPECT_TRUE(f.tensor_parallel()) << f.summary(fast_problem.cluster);
  EXPECT_EQ(f.devices_used(), 8) << f.summary(fast_problem.cluster);
  ASSERT_EQ(f.tp_notes.size(), f.groups.size());
  EXPECT_EQ(f.tp_notes[0].rfind("t=" + std::to_string(f.groups[0].tp), 0), 0u) << f.tp_notes[0];

  const auto [slow_problem, slow] = plan(machine_of_8("slow8.json", R"({"gbyte_per_s": 1, "latency_us": 50})"));
  ASSERT_FALSE(slow.plans.empty());
  const PlanChoice& s = slow.plans[0].choice;
  EXPECT_FALSE(s.tensor_parallel()) << s.summary(slow_problem.cluster);
  // Every stage says why it runs t = 1 (here: one device per stage, the pipeline being cheaper than
  // TP collectives at 1 GB/s).
  ASSERT_EQ(s.tp_notes.size(), s.groups.size());
  for (const std::string& note : s.tp_notes) EXPECT_EQ(note.rfind("t=1 (", 0), 0u) << note;
  EXPECT_GT(fast.plans[0].prediction.tokens_per_second, slow.plans[0].prediction.tokens_per_second);
}

// TP groups are consecutive devices of one type in one machine, t dividing its devices of that
// type; the model must split over t.
TEST(TensorParallelPlanner, OptionsStayInsideAMachineOfOneType) {
  const std::string cluster = write_test_file("two_machines.json", R"({
    "device_types": {"a": {"tflops": 100, "memory_gib": 80}, "b": {"tflops": 50, "memory_gib": 40}},
    "machines": [{"name": "m0", "devices": [{"type": "a", "count": 4}, {"type": "b", "count": 2}],
                  "link": {"gbyte_per_s": 240, "latency_us": 5}},
                 {"name": "m1", "devices": [{"type": "a", "count": 4}], "link": {"gbyte_per_s": 240, "latency_us": 5}}],
    "network": {"gbit_per_s": 100, "latency_us": 10}})");
  const PlanningProblem p = make_problem(read_cluster_spec(cluster), spec::resolve_model("gpt-1.3b", 2048), 8, 2048);
  auto degrees = [&](std::vector<int> devices) {
    std::vector<int> out;
    for (const TpOption& o : tp_options(p, devices, {1, 2, 4, 8})) out.push_back(o.degree);
    return out;
  };
  EXPECT_EQ(degrees({0, 1, 2, 3}), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(degrees({0, 1, 2, 3, 6, 7, 8, 9}), (std::vector<int>{1, 2, 4}));  // two machines: no t = 8
  EXPECT_EQ(degrees({2, 3, 4, 5}), (std::vector<int>{1, 2}));  // t = 4 would mix a and b in one TP group
  EXPECT_EQ(degrees({4, 5}), (std::vector<int>{1, 2}));
  EXPECT_EQ(tp_options(p, {0, 1, 2, 3}, {1, 2, 4})[2].leads, (std::vector<int>{0}));
}

// A TP plan file carries parallel.tp per virtual stage and predicts the same when read back;
// plait train builds it on as many ranks as the plan uses devices (the sum of the schedule ranks'
// degrees), every stage split over its own degree (runtime/pipeline_plan.h).
TEST(TensorParallelPlanner, PlanFileRoundTripsAndTheRuntimeRunsItsDegrees) {
  const PlanningProblem p = make_problem(read_cluster_spec(machine_of_8("fast8.json", R"({"gbyte_per_s": 240, "latency_us": 5})")),
                                         spec::resolve_model("gpt-1.3b", 2048), 4, 2048);
  PlannerOptions o;
  o.simulate = 4;
  o.microbatch_sizes = {1};
  o.segments = false;
  const PlannerResult r = plan_cluster(p, o);
  ASSERT_TRUE(r.plans[0].choice.tensor_parallel());
  const std::string path = test_file("tp-plan.json");
  write_json_file(path, plan_file_json(p, r.plans[0], nullptr));
  const LoadedPlan loaded = read_plan_file(path, p.cluster);
  EXPECT_EQ(loaded.choice.vstage_tensor_parallel(), r.plans[0].choice.vstage_tensor_parallel());
  const PlanPrediction again = simulate_plan(p, loaded.choice, loaded.schedule);
  EXPECT_DOUBLE_EQ(again.step_seconds, r.plans[0].prediction.step_seconds);
  const runtime::JobConfig job = runtime::load_job_config(path);
  EXPECT_GT(job.parallel.max_tensor_parallel(), 1);
  const std::vector<int> degrees = loaded.choice.vstage_tensor_parallel();
  const runtime::PipelinePlan plan = runtime::build_pipeline_plan(job, r.plans[0].choice.devices_used());
  EXPECT_EQ(plan.vstage_tensor_parallel(), degrees);
  EXPECT_EQ(plan.world_size(), r.plans[0].choice.devices_used());
  for (std::size_t v = 0; v < plan.vstage_specs.size(); ++v) EXPECT_EQ(plan.vstage_specs[v].tensor_parallel, degrees[v]);
  // One rank too few is refused, naming the count it needs.
  EXPECT_THROW(runtime::build_pipeline_plan(job, r.plans[0].choice.devices_used() - 1), Error);
}

}  // namespace
}  // namespace plait::plan
