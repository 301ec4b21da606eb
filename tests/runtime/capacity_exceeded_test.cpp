// The memory check before a running job switches plans (runtime/predicted_memory.h,
// capacity_exceeded): a moved layer partition that takes the receiving rank past its device's
// capacity is refused, naming the rank; room for it, or no capacity at all, passes; a change
// that grows no rank's predicted peak passes even over a capacity the model already exceeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mpi/tiny_job.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/predicted_memory.h"

namespace plait::runtime {
namespace {

PipelinePlan plan_of(const JobConfig& job) { return build_pipeline_plan(job, job.parallel.world_size()); }

TEST(CapacityExceeded, AMovedPartitionPastTheReceivingRanksCapacityIsRefused) {
  JobConfig job = test::tiny_job("seq1f1b", 4, 1, 4, 2);  // 8 layers, 2/2/2/2
  PipelinePlan now = plan_of(job);
  job.parallel.layers = {4, 1, 1, 2};  // rank 0 takes two more layers
  PipelinePlan next = plan_of(job);
  EXPECT_EQ(capacity_exceeded(next, now), "");  // no capacities: nothing to check
  const std::vector<sim::CategoryPeaks> before = predicted_memory(now), after = predicted_memory(next);
  ASSERT_GT(after[0].total, before[0].total);
  for (PipelinePlan* p : {&now, &next}) {
    for (std::size_t r = 0; r < p->devices.size(); ++r) {
      p->devices[r].memory_bytes = static_cast<std::size_t>(before[r].total * 1.01) + 1;
    }
  }
  const std::string why = capacity_exceeded(next, now);
  EXPECT_EQ(why.rfind("rank 0's predicted peak ", 0), 0u) << why;
  EXPECT_NE(why.find("would exceed its device's"), std::string::npos) << why;
  // The other way (back to 2/2/2/2) grows rank 0's peak no more: it passes.
  EXPECT_EQ(capacity_exceeded(now, next), "");
  // Room for it.
  for (std::size_t r = 0; r < next.devices.size(); ++r) {
    next.devices[r].memory_bytes = static_cast<std::size_t>(std::max(before[r].total, after[r].total)) + 1;
  }
  EXPECT_EQ(capacity_exceeded(next, now), "");
}

}  // namespace
}  // namespace plait::runtime
