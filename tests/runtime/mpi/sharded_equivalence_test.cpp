// ARCHITECTURE.md invariant 6: every option the planner can choose keeps invariant 3. Sharded
// data parallelism (parallel.shard 1, 2, 3) with and without offload, over data-parallel groups
// of 2 and 4, on homogeneous pipelines (tied embeddings split over the first and last stage; a
// V layout whose ranks hold two chunks, gathered lazily) and on the planner's heterogeneous
// layouts (stage 0 on a fast and a 2x slower rank running 3 and 2 of the 5 micro-batches,
// shards proportional to memory): parameters after 3 AdamW steps equal the single process
// (equivalence_check.h). After every step each rank's trackers hold exactly what
// spec/sharded_state.h says a rank keeps between steps: the weights' shard at level 3 (nothing
// on the device when offloaded), no gradients at levels 2-3, the optimizer state of its shard,
// on the host tier when offloaded.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "equivalence_check.h"
#include "mpi_test_session.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/pipeline_plan.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

struct ShardCase {
  std::string schedule = "1f1b";
  int pp = 1, dp = 2, segments = 1;
  int level = 1;
  bool offload = false;
  bool heterogeneous = false;  // the planner's layout: stage 0 (two ranks) sharded, memory shares
  bool clip = true;            // false: no clipping, so level 3 updates each chunk early
  spec::Family family = spec::Family::gpt2;
  spec::Precision precision = spec::Precision::fp32;
  int tp = 1;  // tensor parallelism: the data-parallel groups are each TP rank's
  std::vector<int> tp_stages;  // or a degree per stage (pipeline rank r holds stage r)

  int schedule_ranks() const { return heterogeneous ? 4 : pp * dp; }
  int ranks() const {
    if (tp_stages.empty()) return schedule_ranks() * tp;
    int per_replica = 0;
    for (int r = 0; r < pp; ++r) per_replica += tp_stages[static_cast<std::size_t>(r)];
    return dp * per_replica;
  }
  std::string name() const {
    std::string n = std::string(spec::family_name(family)) + "_" + schedule + (heterogeneous ? "_hetero" : "") +
                    "_pp" + std::to_string(pp) + "_dp" + std::to_string(dp) + "_shard" + std::to_string(level) +
                    (offload ? "_offload" : "") + (clip ? "" : "_noclip") +
                    (precision == spec::Precision::bf16 ? "_bf16" : "") + (tp > 1 ? "_tp" + std::to_string(tp) : "");
    if (!tp_stages.empty()) n += "_tp_stages";
    for (int t : tp_stages) n += std::to_string(t);
    for (char& c : n) {
      if (c == '-') c = '_';
    }
    return n;
  }
  JobConfig job() const {
    JobConfig j = heterogeneous ? test::heterogeneous_job(schedule, family)
                                : test::tiny_job(schedule, pp, dp, 4, segments, family);
    if (!clip) j.run.train.grad_clip = 0;
    j.run.train.precision = precision;
    ParallelConfig& p = j.parallel;
    if (tp > 1) p.tp = {tp};
    if (!tp_stages.empty()) p.tp = tp_stages;
    if (p.devices.empty()) p.devices.resize(static_cast<std::size_t>(schedule_ranks()));
    for (std::size_t r = 0; r < p.devices.size(); ++r) {
      // Memory of 1-4 GiB (shares proportional to it in the heterogeneous cases), host 1 GiB.
      p.devices[r].memory_bytes = std::size_t{1 + r % 4} << 30;
      p.devices[r].host_memory_bytes = std::size_t{1} << 30;
    }
    if (heterogeneous) {
      // Only the stages two ranks hold can be sharded (the planner's groups of width 2).
      const schedule::Schedule s = schedule::parallel_schedule(p, j.run.train.microbatches, segments, "case");
      for (int v = 0; v < s.layout.num_vstages; ++v) {
        int holders = 0;
        for (const auto& stages : s.layout.rank_vstages) holders += static_cast<int>(std::count(stages.begin(), stages.end(), v));
        p.shard.push_back(holders > 1 ? level : 0);
        p.offload.push_back(holders > 1 && offload);
      }
      p.shard_shares = ParallelConfig::Shares::memory;
    } else {
      p.shard = {level};
      p.offload = {offload};
    }
    return j;
  }
};

ShardCase make(std::string schedule, int pp, int dp, int level, bool offload, int segments = 1) {
  ShardCase c;
  c.schedule = std::move(schedule);
  c.pp = pp;
  c.dp = dp;
  c.level = level;
  c.offload = offload;
  c.segments = segments;
  return c;
}

std::vector<ShardCase> shard_cases() {
  std::vector<ShardCase> cases;
  for (int level : {1, 2, 3}) {
    for (bool offload : {false, true}) {
      cases.push_back(make("1f1b", 1, 2, level, offload));           // dp 2
      cases.push_back(make("1f1b", 1, 4, level, offload));           // dp 4
      cases.push_back(make("seq1f1b", 2, 2, level, offload, 2));     // tied wte on stages 0 and 1
      ShardCase h = make("seq1f1b", 1, 1, level, offload, 2);        // uneven micro-batch counts
      h.heterogeneous = true;
      cases.push_back(h);
    }
  }
  // Two chunks per rank (lazy gathers, a rank holding both tied copies), and the heterogeneous
  // V layout; level 3 with and without offload.
  for (bool offload : {false, true}) {
    cases.push_back(make("zb-v", 2, 2, 3, offload));
    ShardCase h = make("zb-v", 1, 1, 3, offload);
    h.heterogeneous = true;
    cases.push_back(h);
  }
  cases.push_back(make("interleaved", 2, 4, 2, false));
  cases.push_back(make("interleaved", 2, 4, 3, true));
  // Early level-3 updates (no clipping), and LLaMA (untied head).
  ShardCase early = make("1f1b", 1, 2, 3, false);
  early.clip = false;
  cases.push_back(early);
  early.offload = true;
  early.dp = 4;
  cases.push_back(early);
  ShardCase llama = make("1f1b", 2, 2, 3, true);
  llama.family = spec::Family::llama;
  cases.push_back(llama);
  // bf16: the fp32 master sharded with the optimizer state from level 1, the bf16 compute copy
  // all-gathered after the update (levels 1-2) or before a use (level 3).
  for (int level : {1, 2, 3}) {
    for (bool offload : {false, true}) {
      for (ShardCase c : {make("1f1b", 1, 2, level, offload), make("seq1f1b", 2, 2, level, offload, 2)}) {
        c.precision = spec::Precision::bf16;
        cases.push_back(c);
      }
    }
  }
  llama.precision = spec::Precision::bf16;
  cases.push_back(llama);
  // Tensor parallelism x sharded data parallelism: each TP rank's data-parallel group shards
  // that rank's part of the stage (levels 1-3, offload, the tied table split over two stages).
  for (ShardCase c : {make("1f1b", 1, 2, 1, false), make("1f1b", 1, 2, 3, true), make("seq1f1b", 2, 2, 2, false, 2)}) {
    c.tp = 2;
    cases.push_back(c);
  }
  // Degrees per stage (6 ranks: np6): each stage's data-parallel groups are its own TP ranks',
  // the tied table summed as whole tables across the two degrees.
  ShardCase mixed = make("seq1f1b", 2, 2, 2, false, 2);
  mixed.tp_stages = {2, 1};
  cases.push_back(mixed);
  mixed = make("1f1b", 2, 2, 3, true);
  mixed.tp_stages = {1, 2};
  cases.push_back(mixed);
  return cases;
}

// What spec/sharded_state.h says the rank keeps between steps, by tier and category, against
// its trackers.
void expect_between_steps(DistributedTrainer& trainer, MemoryTracker& device) {
  double parameters = 0, gradients = 0, optimizer = 0, host_parameters = 0, host_optimizer = 0;
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    const ShardedChunk& chunk = trainer.data_parallel().chunk(c);
    const spec::ShardedStateBytes b = spec::sharded_state_bytes(
        static_cast<std::int64_t>(trainer.chunk(c).parameters().size()), chunk.shard_end() - chunk.shard_begin(),
        chunk.policy(), trainer.chunk(c).precision());
    parameters += b.parameters_resident;
    gradients += b.gradients_idle;
    optimizer += b.optimizer;
    host_parameters += b.host_parameters;
    host_optimizer += b.host_optimizer;
  }
  const int r = trainer.rank();
  EXPECT_EQ(device.current(MemoryCategory::kParameters), parameters) << "rank " << r;
  EXPECT_EQ(device.current(MemoryCategory::kGradients), gradients) << "rank " << r;
  EXPECT_EQ(device.current(MemoryCategory::kOptimizerState), optimizer) << "rank " << r;
  MemoryTracker& host = trainer.host_tracker();
  EXPECT_EQ(host.current(MemoryCategory::kParameters), host_parameters) << "rank " << r;
  EXPECT_EQ(host.current(MemoryCategory::kOptimizerState), host_optimizer) << "rank " << r;
  EXPECT_EQ(host.current(MemoryCategory::kGradients), 0u) << "rank " << r;  // staging freed after the update
}

class ShardedEquivalence : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardedEquivalence, MatchesOneProcessAfterThreeSteps) {
  const ShardCase& c = GetParam();
  if (c.ranks() != world().size()) GTEST_SKIP() << "needs " << c.ranks() << " ranks";
  const JobConfig job = c.job();
  const PipelinePlan plan = build_pipeline_plan(job, world().size());
  ASSERT_TRUE(plan.sharded());
  test::expect_equivalent(plan, job.global_train(), expect_between_steps);
}

INSTANTIATE_TEST_SUITE_P(Levels, ShardedEquivalence, ::testing::ValuesIn(shard_cases()),
                         [](const ::testing::TestParamInfo<ShardCase>& info) { return info.param.name(); });

}  // namespace
}  // namespace plait::runtime
