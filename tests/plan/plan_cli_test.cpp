// `plait plan` as a user runs it (PLAIT_BINARY): a plan printed and written, --evaluate of the
// file it wrote, a provisional profile, and one-line errors for bad files and unplannable
// requests.
#include <gtest/gtest.h>


#include "plait/core/json_fields.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/latency_table.h"
#include "support/run_command.h"
#include "test_files.h"

namespace plait::plan {
namespace {

using test::CommandResult;
using test::run_plait;

const std::string kCpu4 = "--cluster " + shared_cluster("cpu4-emulated.json") + " --model " +
                          shared_cluster("cpu4-base.json") + " --global-batch 32 --seq 256 --simulate 4 ";

TEST(PlanCli, PlansWritesAndEvaluates) {
  const std::string out = test_file("plan.json");
  const CommandResult o = run_plait("plan " + kCpu4 + "--config " + shared_cluster("cpu4-base.json") + " --out " + out);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("chosen plan: "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("tokens/s"), std::string::npos);
  EXPECT_NE(o.out.find("wrote " + out), std::string::npos);
  const CommandResult e = run_plait("plan --cluster " + shared_cluster("cpu4-emulated.json") + " --evaluate " + out);
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_NE(e.out.find(out + ": "), std::string::npos) << e.out;
  // The evaluation predicts the step the plan printed.
  const std::size_t at = o.out.find("  step "), eat = e.out.find("  step ");
  ASSERT_NE(at, std::string::npos);
  ASSERT_NE(eat, std::string::npos);
  EXPECT_EQ(o.out.substr(at, o.out.find(' ', at + 8) - at), e.out.substr(eat, e.out.find(' ', eat + 8) - eat));
}

TEST(PlanCli, ProvisionalProfile) {
  const std::string out = test_file("profile.json");
  const CommandResult o = run_plait("plan --flops-profile " + out + " --model " + shared_cluster("cpu4-base.json") +
                                    " --seq 256 --gflops 40 --device-name host --max-microbatch 4");
  ASSERT_EQ(o.status, 0) << o.err;
  const sim::LatencyTable t = sim::read_latency_table(out, true);
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].device, "host");
  EXPECT_EQ(t.entries[0].forward_ms.size(), 4u);
  EXPECT_NEAR(t.entries[0].backward_ms[0], 2 * t.entries[0].forward_ms[0], 1e-9);
}

// --schedule's help lists the families from the family table itself.
TEST(PlanCli, HelpListsEveryScheduleFamily) {
  const CommandResult r = run_plait("plan --help");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(comma-separated): " + schedule::schedule_family_names() + ";"), std::string::npos) << r.out;
}

TEST(PlanCli, OneLineErrors) {
  const std::string bad = write_test_file("cluster.json", R"({"device_types": {"x": {"tflops": 1, "memory_gib": 8}},
    "machines": [{"name": "m", "devices": [{"type": "x", "count": 0}]}]})");
  struct Case {
    std::string args, expected;
  };
  const Case cases[] = {
      {"plan --model gpt-7b --global-batch 8 --seq 1024", "plait: error: --cluster: required"},
      {"plan --cluster " + bad + " --model gpt-7b --global-batch 8 --seq 1024",
       "plait: error: " + bad + ": machines[0].devices[0].count: expected an integer in [1, 65536], found 0"},
      {"plan --cluster " + shared_cluster("cpu4-emulated.json") + " --model gpt-7b --global-batch 8 --seq 1024",
       "plait: error: cannot plan: no layout fits in memory; the closest: "},
      {"plan " + kCpu4 + "--schedule 1f1b --devices-of-type fast --microbatch-size 3",
       "plait: error: cannot plan: no micro-batch size tried divides the global batch of 32 sequences"},
      {"plan " + kCpu4 + "--top 0", "plait: error: --top: expected an integer in [1, 100], found '0'"},
  };
  for (const Case& c : cases) {
    const CommandResult o = run_plait(c.args);
    EXPECT_EQ(o.status, 1) << c.args;
    EXPECT_EQ(o.err.rfind(c.expected, 0), 0u) << "got: " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
}

// --documents: the problem and every plan say what they were planned for; the plan file packs
// documents; --evaluate of it with the same documents predicts the same step; a missing
// histogram and a config whose data are text paths are one-line errors naming the file.
TEST(PlanCli, PlansForPackedDocuments) {
  const std::string out = test_file("plan.json");
  const CommandResult o = run_plait("plan " + kCpu4 + "--documents lognormal:30:1.0 --document-steps 4 --out " + out);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("documents  packed (data.packing \"documents\"), lengths from lognormal(median 30, sigma 1, "
                       "seed 1), plain order; plans are made for the worst micro-batch of 4 steps drawn"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find(", 4 steps drawn: planned for the worst step (#"), std::string::npos) << o.out;
  const nlohmann::json plan = read_json_file(out);
  EXPECT_EQ(plan["data"]["packing"], "documents");
  if (plan["parallel"].contains("split")) {
    EXPECT_TRUE(plan["train"]["segments"].is_number_integer());
  }
  const CommandResult e = run_plait("plan --cluster " + shared_cluster("cpu4-emulated.json") + " --evaluate " + out +
                                    " --documents lognormal:30:1.0 --document-steps 4");
  ASSERT_EQ(e.status, 0) << e.err;
  const std::size_t at = o.out.find("  step "), eat = e.out.find("  step ");
  ASSERT_NE(eat, std::string::npos) << e.out;
  EXPECT_EQ(o.out.substr(at, o.out.find(' ', at + 8) - at), e.out.substr(eat, e.out.find(' ', eat + 8) - eat));
  EXPECT_NE(e.out.find("planned for the worst step"), std::string::npos) << e.out;

  const std::string missing = test_file("none.lengths.json");
  const CommandResult m = run_plait("plan " + kCpu4 + "--documents histogram:" + missing);
  EXPECT_EQ(m.status, 1);
  EXPECT_EQ(m.err.rfind("plait: error: --documents: " + missing + ": (file): ", 0), 0u) << m.err;
  const std::string base = shared_cluster("cpu4-base.json");
  const CommandResult t = run_plait("plan " + kCpu4 + "--config " + base + " --documents lognormal:30:1.0");
  EXPECT_EQ(t.status, 1);
  EXPECT_EQ(t.err.rfind("plait: error: " + base + ": data.paths: --documents plans for documents packed from token shards", 0),
            0u)
      << t.err;
}

// A search whose memory bound exceeds what there is never starts, stating the bound; a search
// shows its passes on stderr (from the start with --progress always).
TEST(PlanCli, RefusesASearchLargerThanTheMemoryAndShowsProgress) {
  const CommandResult r = run_plait("plan " + kCpu4 + "--max-memory 1MiB");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("plait: error: this search would hold about 96.78 MiB (a bound for 4 devices: two 16-byte "
                       "links per pair of them while a plan is simulated, 200 KiB per device and 96 MiB besides; "
                       "docs/planner.md), more than the 1.00 MiB of --max-memory"),
            std::string::npos)
      << r.err;
  const CommandResult p = run_plait("plan " + kCpu4 + "--progress always");
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.err.find("plait: planning: finding the stage groupings (micro-batch size 1, 1 of "), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("plait: planning: estimating every schedule option on the best "), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("plait: planning: scheduling and simulating the best "), std::string::npos) << p.err;
  EXPECT_NE(p.out.find("chosen plan: "), std::string::npos);
}

}  // namespace
}  // namespace plait::plan
