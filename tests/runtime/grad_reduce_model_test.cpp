// What train.grad_reduce changes in the models of a plan's data parallelism: the simulator's DP
// timing moves 2 B per gradient element (and the tied table's all-reduce 2 B per entry) under
// "bf16", the bf16 compute copy's 2 B per weight in gathers either way; and the comm buffers data
// parallelism holds (runtime::predicted_dp_comm_bytes): the tied table's sum in the reduction's
// type, plus the bf16 wire copy of the rank's stage. (plait bench runtime memory measures them:
// the sharding rows' comm column.)
#include <gtest/gtest.h>

#include "plait/model/parameter_layout.h"
#include "plait/runtime/data_parallel_model.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/predicted_memory.h"

namespace plait::runtime {
namespace {

// seq1f1b pp 2 x dp 2 of a 4-layer GPT-2 (tied table split over the two stages), bf16.
PipelinePlan plan_of(spec::GradReduce reduce) {
  JobConfig job = job_from_run_config(default_run_config());
  job.run.train.precision = spec::Precision::bf16;
  job.run.train.grad_reduce = reduce;
  job.parallel.schedule = "seq1f1b";
  job.parallel.pp = 2;
  job.parallel.dp = 2;
  return build_pipeline_plan(job, 4);
}

TEST(GradReduceModel, SimulatorMovesTheReductionsBytes) {
  for (spec::GradReduce reduce : {spec::GradReduce::fp32, spec::GradReduce::bf16}) {
    const PipelinePlan plan = plan_of(reduce);
    const double gradient = reduce == spec::GradReduce::bf16 ? 2 : 4;
    const sim::DataParallelModel dp = data_parallel_model(plan, UpdateCosts{});
    ASSERT_EQ(dp.stages.size(), 2u);
    for (const sim::StageSync& s : dp.stages) {
      EXPECT_EQ(s.gradient_bytes_per_element, gradient);
      EXPECT_EQ(s.weight_bytes_per_element, 2);
    }
    EXPECT_EQ(dp.tied_bytes, gradient * plan.model.vocab * plan.model.hidden);
  }
}

TEST(GradReduceModel, CommBuffersAreTheTiedSumAndTheBf16WireCopy) {
  const double table = 256.0 * 128;  // V x C
  const PipelinePlan fp32 = plan_of(spec::GradReduce::fp32);
  const PipelinePlan bf16 = plan_of(spec::GradReduce::bf16);
  for (int r = 0; r < 4; ++r) {
    const int v = bf16.schedule.layout.rank_vstages[static_cast<std::size_t>(r)][0];
    const auto elements = static_cast<double>(
        model::layout_size(model::parameter_layout(bf16.model, bf16.vstage_specs[static_cast<std::size_t>(v)])));
    EXPECT_EQ(predicted_dp_comm_bytes(fp32, r), 4 * table) << "rank " << r;  // gradients reduced in place
    EXPECT_EQ(predicted_dp_comm_bytes(bf16, r), 2 * (elements - table) + 2 * table) << "rank " << r;
  }
}

}  // namespace
}  // namespace plait::runtime
