// The measured step gathered from every rank: one compute event per action, in order and
// non-overlapping on each rank, busy time within the makespan, and the timeline writers accept it.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "mpi_test_session.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/measured_step.h"
#include "plait/trace/chrome_trace.h"
#include "plait/trace/html_timeline.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

TEST(MeasuredTimeline, EveryActionOfEveryRankInOrder) {
  const int n = world().size();
  const JobConfig job = test::tiny_job("seq-zb", n, 1, 4, 2);  // split B and W, 2 segments
  const PipelinePlan plan = build_pipeline_plan(job, n);
  const TrainConfig t = job.global_train();
  const test::TinyData data(plan.model.vocab);
  const data::BatchLoader loader = data.loader(t);
  MemoryTracker tracker;
  TrainerOptions options;
  options.record_events = true;
  DistributedTrainer trainer(plan, t, world(), tracker, options);
  trainer.step(0, loader);
  const MeasuredStep step = gather_step(world(), trainer.step(1, loader));
  ASSERT_EQ(step.events.size(), static_cast<std::size_t>(n));
  double busy = 0;
  for (int r = 0; r < n; ++r) {
    std::size_t compute = 0;
    double last_end = 0;
    for (const trace::Event& e : step.events[r]) {
      EXPECT_EQ(e.rank, r);
      EXPECT_LE(e.start, e.end);
      if (!trace::is_compute(e.kind)) continue;
      const schedule::Action& a = plan.schedule.ranks[r][compute];
      EXPECT_EQ(e.kind, trace::event_kind(a.kind));
      EXPECT_EQ(e.microbatch, a.microbatch);
      EXPECT_EQ(e.segment, a.segment);
      EXPECT_GE(e.start, last_end);
      last_end = e.end;
      ++compute;
    }
    EXPECT_EQ(compute, plan.schedule.ranks[r].size());
    EXPECT_DOUBLE_EQ(step.finish[r], last_end);
    busy += step.busy[r];
  }
  EXPECT_LE(busy, n * step.makespan() + 1e-9);
  EXPECT_GE(step.bubble_fraction(), 0.0);
  EXPECT_LT(step.bubble_fraction(), 1.0);
  const trace::Timeline tl = measured_timeline(plan, step, "test", {{"k", "v"}});
  std::ostringstream json, html;
  trace::write_chrome_trace(tl, json);
  trace::write_html_timeline(tl, html);
  EXPECT_NE(json.str().find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(html.str().find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace plait::runtime
