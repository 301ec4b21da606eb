// The per-rank view of a lowered schedule the executor walks: inputs and outputs resolved to
// messages or local hand-offs, receives posted in their window, chunks finishing at their last
// weight-gradient action; no schedule family is special-cased.
#include "plait/runtime/rank_program.h"

#include <gtest/gtest.h>

#include <climits>

#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/sharded_data_parallel.h"
#include "plait/schedule/blocking_execution.h"

namespace plait::runtime {
namespace {

PipelinePlan plan_for(const std::string& schedule, int pp, int dp, int chunks) {
  JobConfig job;
  job.run.source = "test";
  job.run.model = spec::gpt2_model(8, 32, 4, 64, 32);
  job.run.train.steps = 1;
  job.run.train.seq = 16;
  job.run.train.microbatch_size = 1;
  job.run.train.microbatches = 4;
  job.parallel.schedule = schedule;
  job.parallel.pp = pp;
  job.parallel.dp = dp;
  job.parallel.chunks = chunks;
  return build_pipeline_plan(job, pp * dp);
}

TEST(RankProgram, VLayoutTurnIsALocalHandOff) {
  // ZB-V on 2 ranks: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2; the activation from
  // stage 1 to 2 and the gradient from 2 to 1 stay on rank 1.
  const PipelinePlan plan = plan_for("zb-v", 2, 1, 0);
  const schedule::LoweredSchedule lowered = lower_plan(plan, INT32_MAX);
  const RankProgram r1 = make_rank_program(plan, lowered, 1, INT_MAX);
  int local_in = 0, local_out = 0, received = 0, sent = 0;
  for (const ComputeStep& s : r1.steps) {
    local_in += s.input_local >= 0;
    local_out += s.output_local >= 0;
    received += s.input_message >= 0;
    sent += s.output_message >= 0;
    if (s.action.kind == schedule::ActionKind::F && s.vstage == 2) {
      EXPECT_GE(s.input_local, 0);
    }
    if (schedule::is_backward_input(s.action.kind) && s.vstage == 2) {
      EXPECT_GE(s.output_local, 0);
    }
  }
  EXPECT_EQ(local_in, 8);   // 4 activations 1 -> 2, 4 gradients 2 -> 1
  EXPECT_EQ(local_out, 8);
  EXPECT_EQ(received, 8);   // activations 0 -> 1, gradients 3 -> 2
  EXPECT_EQ(sent, 8);
  // Both chunks finish once; every receive is posted exactly once (all at the start here).
  int finishing = 0;
  for (const ComputeStep& s : r1.steps) finishing += s.finishes_chunk;
  EXPECT_EQ(finishing, 2);
  EXPECT_EQ(r1.posts[0].size(), 8u);
}

TEST(RankProgram, ReceivesArePostedInTheirWindow) {
  const PipelinePlan plan = plan_for("1f1b", 2, 2, 0);
  for (std::int32_t window : {0, 1, 3}) {
    const schedule::LoweredSchedule lowered = lower_plan(plan, window);
    for (int rank = 0; rank < 4; ++rank) {
      const RankProgram p = make_rank_program(plan, lowered, rank, INT_MAX);
      for (std::size_t i = 0; i < p.steps.size(); ++i) {
        if (p.steps[i].input_message < 0) continue;
        const std::size_t at = i >= static_cast<std::size_t>(window) ? i - window : 0;
        const auto& posts = p.posts[at];
        EXPECT_NE(std::find(posts.begin(), posts.end(), p.steps[i].input_message), posts.end())
            << "rank " << rank << " step " << i << " window " << window;
        // Replicas exchange only within their pipeline: ranks 0,1 and 2,3.
        const schedule::Message& m = lowered.messages[p.steps[i].input_message];
        EXPECT_EQ(m.src_rank / 2, rank / 2);
      }
    }
  }
  EXPECT_THROW(make_rank_program(plan, lower_plan(plan, 1), 0, 3), Error);  // tags beyond 3
}

}  // namespace
}  // namespace plait::runtime

namespace plait::runtime {
namespace {

// Level-3 gathers are collectives among a stage's holders: started one action before each
// chunk's first use, they must not wait on each other in a cycle through the pipeline. Ranks 0
// and 1 hold stages 0 and 2 (both level 3), rank 2 stage 1, forward only: rank 0 uses stage 0
// first and stage 2 from its third action, rank 1 the other way round. Rank 0's first action
// needs stage 0 gathered, which needs rank 1 to reach its second action, which needs stage 2
// gathered, which needs rank 0 to reach its second action: a deadlock the check must see.
TEST(RankProgram, LazyGathersThatWouldDeadlockAreFound) {
  JobConfig job;
  job.run.source = "test";
  job.run.model = spec::gpt2_model(3, 32, 4, 64, 32);
  job.run.train.steps = 1;
  job.run.train.seq = 16;
  job.run.train.microbatch_size = 1;
  job.run.train.microbatches = 4;
  PipelinePlan plan = build_pipeline_plan(job, 1);
  schedule::Schedule& s = plan.schedule;
  s.layout.rank_vstages = {{0, 2}, {0, 2}, {1}};
  s.layout.num_vstages = 3;
  using schedule::Action;
  const auto F = [](int mb, int chunk) { return Action{schedule::ActionKind::F, mb, 0, chunk}; };
  s.ranks = {{F(0, 0), F(2, 0), F(1, 1), F(3, 1)}, {F(0, 1), F(2, 1), F(1, 0), F(3, 0)}, {F(0, 0), F(2, 0), F(1, 0), F(3, 0)}};
  plan.vstage_layers = {1, 1, 1};
  plan.vstage_specs = {{0, 1, true, false}, {1, 2, false, false}, {2, 3, false, true}};
  plan.devices.resize(3);
  plan.vstage_shard = {{3, false}, {0, false}, {3, false}};
  const schedule::LoweredSchedule lowered = lower_plan(plan, INT32_MAX);
  // Without the gathers the programs finish.
  ASSERT_TRUE(schedule::execute_blocking(lowered).completed);
  EXPECT_FALSE(lazy_gathers_deadlock_free(plan, lowered));
  // Stage 0 alone sharded: rank 0 waits for rank 1 to start its gather before rank 1's second
  // action, which needs stage 1's output of micro-batch 0, which needs rank 0's first action: a
  // deadlock too.
  plan.vstage_shard[2] = {};
  EXPECT_FALSE(lazy_gathers_deadlock_free(plan, lowered));
  // Stage 2 alone sharded: rank 1 waits at its first action for rank 0 to start the gather
  // before its second, which rank 0 reaches without waiting (stage 0 is not gathered).
  plan.vstage_shard[0] = {};
  plan.vstage_shard[2] = {3, false};
  EXPECT_TRUE(lazy_gathers_deadlock_free(plan, lowered));
}

// The generated layouts are replicas running the same program, so their gathers line up.
TEST(RankProgram, GeneratedLayoutsGatherLazily) {
  for (const auto& [schedule, pp, chunks] : {std::tuple{"zb-v", 2, 0}, std::tuple{"interleaved", 2, 2}, std::tuple{"1f1b", 1, 0}}) {
    PipelinePlan plan = plan_for(schedule, pp, 2, chunks);
    plan.vstage_shard.assign(static_cast<std::size_t>(plan.num_vstages()), {3, false});
    EXPECT_TRUE(lazy_gathers_deadlock_free(plan, lower_plan(plan, 1))) << schedule;
  }
}

}  // namespace
}  // namespace plait::runtime
