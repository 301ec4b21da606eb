#include <gtest/gtest.h>

#include <string>

#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"
#include "plait/schedule/validator.h"

namespace plait::schedule {
namespace {

Schedule text(const std::string& t) { return parse_schedule(t, "test"); }

// Each hand-broken schedule must be rejected by the named rule at the named place.
struct Broken {
  const char* name;
  Schedule schedule;
  const char* rule;
  int rank;
  int position;
};

std::vector<Broken> broken_schedules() {
  std::vector<Broken> cases;
  {
    Schedule s = generate_schedule("1f1b", {2, 1, 2, 1});
    s.layout.rank_vstages[1] = {5};
    cases.push_back({"stage out of range", s, "layout", -1, -1});
  }
  cases.push_back({"chunk outside the rank", text("layout 0 1\nF0.0 BW0.0c1\nF0.0 BW0.0\n"), "range", 0, 1});
  {
    Schedule s = text("F0.0 BW0.0 F1.0 BW1.0\nF0.0 BW0.0 F1.0 BW1.0\n");
    s.layout.num_microbatches = 1;  // micro-batch 1 now lies outside the layout
    cases.push_back({"micro-batch outside", s, "range", 0, 2});
  }
  cases.push_back({"duplicate forward", text("F0.0 F0.0 BW0.0\nF0.0 BW0.0\n"), "exactly-once", 0, 1});
  cases.push_back({"missing backward", text("F0.0 F1.0 BW0.0 BW1.0\nF0.0 BW0.0 F1.0\n"), "exactly-once", -1, -1});
  cases.push_back({"fused and split", text("F0.0 BW0.0 W0.0\n"), "exactly-once", 0, 2});
  cases.push_back({"B without W", text("F0.0 B0.0\n"), "exactly-once", -1, -1});
  {
    // Two ranks hold stage 0 (data parallel); the backward runs where the forward did not.
    Schedule s = text("layout 0 0\nF0.0\nBW0.0\n");
    cases.push_back({"backward on another rank", s, "same-rank", 1, 0});
  }
  {
    Schedule s = text("layout 0 0\nF0.0 BW0.1 BW0.0\nF0.1\n");
    cases.push_back({"segments split over ranks", s, "same-rank", 0, 1});
  }
  cases.push_back({"segment before its prefix", text("F0.1 F0.0 BW0.1 BW0.0\n"), "kv-prefix-order", 0, 0});
  cases.push_back({"backward before forward", text("BW0.0 F0.0\n"), "backward-after-forward", 0, 0});
  cases.push_back({"segment backwards in forward order", text("F0.0 F0.1 BW0.0 BW0.1\n"),
                   "backward-segment-order", 0, 2});
  cases.push_back({"W before B", text("F0.0 W0.0 B0.0\n"), "weight-after-backward", 0, 1});
  // One rank holding stages 0 and 1 must run them in order itself.
  cases.push_back({"chunk 1 before chunk 0", text("F0.0c1 F0.0c0 BW0.0c1 BW0.0c0\n"),
                   "local-activation-order", 0, 0});
  cases.push_back({"gradient order on one rank", text("F0.0c0 F0.0c1 BW0.0c0 BW0.0c1\n"),
                   "local-gradient-order", 0, 2});
  // Every unit is fine on its own, but rank 1 waits for micro-batch 1 while rank 0 waits for the
  // gradient of micro-batch 0, which rank 1 will only send later.
  cases.push_back({"crossed orders", text("F0.0 BW0.0 F1.0 BW1.0\nF1.0 BW1.0 F0.0 BW0.0\n"),
                   "deadlock", 0, 1});
  return cases;
}

TEST(Validator, RejectsEachRuleAtTheRightPlace) {
  for (const Broken& c : broken_schedules()) {
    const auto v = validate(c.schedule);
    ASSERT_TRUE(v.has_value()) << c.name << " was accepted:\n" << format_schedule(c.schedule);
    EXPECT_EQ(v->rule, c.rule) << c.name << ": " << summary(c.schedule, *v);
    EXPECT_EQ(v->rank, c.rank) << c.name << ": " << summary(c.schedule, *v);
    EXPECT_EQ(v->position, c.position) << c.name << ": " << summary(c.schedule, *v);
    EXPECT_FALSE(v->detail.empty());
  }
}

TEST(Validator, DeadlockReportShowsTheCycleOnAGrid) {
  const Schedule s = text("F0.0 BW0.0 F1.0 BW1.0\nF1.0 BW1.0 F0.0 BW0.0\n");
  try {
    check_valid(s);
    FAIL() << "accepted";
  } catch (const ScheduleViolationError& e) {
    const std::string line = e.what();
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_NE(line.find("rank 0 at step 1 (BW0.0) waits for the gradient of micro-batch 0"), std::string::npos) << line;
    EXPECT_NE(line.find("rank 1 at step 0 (F1.0) waits for the activation of micro-batch 1"), std::string::npos) << line;
    const std::string& grid = e.grid();
    EXPECT_NE(grid.find("Step 001: [BW0.0]"), std::string::npos) << grid;
    EXPECT_NE(grid.find("<-- ERROR HERE (rank 0)"), std::string::npos) << grid;
    EXPECT_NE(grid.find("[F1.0]"), std::string::npos) << grid;  // the other end of the cycle
  }
}

// With receives posted only when they are waited on, sends rendezvous (MPI_Ssend): 1F1B's
// neighbours then send to each other at the same time and hang, while posting one compute
// action ahead is enough. The default (everything posted ahead) never blocks a send.
TEST(Validator, DeadlockDependsOnHowEarlyReceivesArePosted) {
  const Schedule s = generate_schedule("1f1b", {4, 1, 8, 1});
  EXPECT_FALSE(validate(s).has_value());
  const auto rendezvous = validate(s, {0});
  ASSERT_TRUE(rendezvous.has_value());
  EXPECT_EQ(rendezvous->rule, "deadlock");
  EXPECT_NE(rendezvous->detail.find("to post the receive"), std::string::npos) << rendezvous->detail;
  EXPECT_FALSE(validate(s, {1}).has_value());
}

// Data parallelism: replicated schedules validate, and so does a Zorse-style heterogeneous stage
// (two ranks of unequal speed sharing stage 0 with 3 and 1 micro-batches, one rank for stage 1).
TEST(Validator, AcceptsSeveralRanksPerStage) {
  for (const char* name : {"1f1b", "zb-v", "seq1f1b-i"}) {
    const ScheduleFamily& f = *find_schedule_family(name);
    PipelineShape shape{3, f.fixed_chunks > 0 ? f.fixed_chunks : 2, 4, f.sequence_level ? 2 : 1};
    const Schedule s = replicate(generate_schedule(f, shape), 3);
    EXPECT_EQ(s.num_ranks(), 9);
    EXPECT_EQ(s.layout.num_microbatches, 12);
    const auto v = validate(s);
    EXPECT_FALSE(v.has_value()) << name << ": " << describe(s, *v);
  }
  const Schedule uneven = text(
      "layout 0 0 1\n"
      "F0.0 F1.0 BW0.0 F2.0 BW1.0 BW2.0\n"
      "F3.0 BW3.0\n"
      "F0.0 BW0.0 F3.0 BW3.0 F1.0 BW1.0 F2.0 BW2.0\n");
  const auto v = validate(uneven);
  EXPECT_FALSE(v.has_value()) << describe(uneven, *v);
  // The same ranks, but the fast rank now wants micro-batch 3 first while stage 1 keeps it last:
  // rank 1 waits on rank 2, which waits on rank 0, which waits on rank 2's gradients.
  const Schedule crossed = text(
      "layout 0 0 1\n"
      "F0.0 BW0.0 F1.0 BW1.0 F2.0 BW2.0\n"
      "F3.0 BW3.0\n"
      "F1.0 BW1.0 F0.0 BW0.0 F2.0 BW2.0 F3.0 BW3.0\n");
  const auto bad = validate(crossed);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->rule, "deadlock");
}

}  // namespace
}  // namespace plait::schedule
