// `plait sim` and `plait bench sim` as a user runs them (PLAIT_BINARY): results print the device
// profile and its source; bad flags, impossible parameters and malformed schedule text give one
// clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plait/core/available_memory.h"
#include "plait/schedule/schedule_family.h"
#include "plait/spec/model_presets.h"
#include "support/run_command.h"

namespace plait::sim {
namespace {

using test::CommandResult;
using test::run_plait;
using test::write_test_file;

const std::string kSmall = "--model gpt-1.3b --pp 4 --microbatches 4 --seq 4096 ";

TEST(SimCli, PrintsTheResultWithTheDeviceAndItsSource) {
  const CommandResult r = run_plait("sim " + kSmall + "--segments 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("schedule   seq1f1b: Seq1F1B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device     a100-80gb: 312.0 TFLOP/s peak x measured efficiency"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(source: peak: NVIDIA A100 Tensor Core GPU datasheet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result     step "), std::string::npos) << r.out;
  // A micro-batch schedule with --segments left at its default runs whole micro-batches.
  const CommandResult one = run_plait("sim " + kSmall + "--schedule 1f1b --device zorse:l4");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.out.find("1 segment(s)"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("device     zorse:l4:float16: measured per-layer latencies"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("deepspeedgpt_1.3b (named for this model) on l4"), std::string::npos) << one.out;  // the model's own table
  // Zorse never measured GPT 1.3B on an A100 80GB: an error naming the choice, not LLaMA's table.
  const CommandResult none = run_plait("sim " + kSmall + "--schedule 1f1b --device zorse:a100x80");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("has no float16 latencies of deepspeedgpt_1.3b on a100x80"), std::string::npos) << none.err;
  const CommandResult chosen =
      run_plait("sim " + kSmall + "--schedule 1f1b --device zorse:a100x80 --profile-model deepspeedllama_tiny");
  ASSERT_EQ(chosen.status, 0) << chosen.err;
  EXPECT_NE(chosen.out.find("deepspeedllama_tiny (named for this model) on a100x80"), std::string::npos) << chosen.out;
}

// With unlike devices, each timeline row names its rank's device (that is why one row is busier)
// and the summary lists each device with its ranks.
TEST(SimCli, TimelineRowsNameEachRanksDevice) {
  const std::string html = test::test_file("devices.html");
  const CommandResult r = run_plait("sim " + kSmall + "--device zorse:l4,zorse:l4,zorse:p40,zorse:l4 --html " + html);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string page = test::file_bytes(html);
  EXPECT_NE(page.find(">rank 2 (stage 2): zorse:p40:float16</text>"), std::string::npos);
  EXPECT_NE(page.find(">rank 3 (stage 3): zorse:l4:float16</text>"), std::string::npos);
  EXPECT_NE(page.find("<tr><td>device (ranks 0, 1, 3)</td><td>zorse:l4:float16: measured"), std::string::npos);
  EXPECT_NE(page.find("<tr><td>device (rank 2)</td><td>zorse:p40:float16: measured"), std::string::npos);
  std::filesystem::remove(html);
}

// --help lists every preset of the table with its shape (the table is the list, so a preset added
// to it cannot be missing from the help).
TEST(SimCli, HelpListsEveryModelPreset) {
  const CommandResult r = run_plait("sim --help");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_GE(spec::model_presets().size(), 10u);
  for (const spec::NamedModel& p : spec::model_presets()) {
    // The help line that starts with the preset's name.
    std::string line;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);) {
      if (l.find_first_not_of(' ') != std::string::npos && l.substr(l.find_first_not_of(' ')).starts_with(p.name + " ")) {
        line = l;
      }
    }
    ASSERT_FALSE(line.empty()) << p.name << "\n" << r.out;
    const spec::ModelSpec& m = p.model;
    const std::string shape = std::string(spec::family_name(m.family)) + " " + std::to_string(m.layers) + "/" +
                              std::to_string(m.hidden) + "/" + std::to_string(m.heads);
    EXPECT_NE(line.find(shape), std::string::npos) << line;
    EXPECT_NE(line.find(", ffn " + std::to_string(m.ffn_hidden) + ", vocab " + std::to_string(m.vocab)),
              std::string::npos)
        << line;
    EXPECT_EQ(line.find("untied") != std::string::npos, !m.tie_embeddings) << line;
  }
  EXPECT_NE(r.out.find("tinyllama-1.1b  llama 22/2048/32 (4 kv), ffn 5632, vocab 32000, untied LM head"),
            std::string::npos)
      << r.out;
}

TEST(SimCli, BadParametersGiveOneClearLine) {
  const std::string malformed = write_test_file("malformed.txt", "F0.0 BW0.0\nF0.0 BW0.x\n");
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"sim --pp 0", "plait: error: --pp: expected an integer in [1, "},
      {"sim --microbatches many", "plait: error: --microbatches: expected an integer"},
      {"sim " + kSmall + "--schedule interleaved --chunks 1", "interleaved: interleaves v >= 2 chunks"},
      {"sim " + kSmall + "--schedule 1f1b --segments 2", "1f1b: schedules whole micro-batches, so segments must be 1"},
      {"sim --model gpt-7b --pp 64 --schedule 1f1b", "cannot place 32 layers on 64 virtual stages"},
      {"sim " + kSmall + "--split uneven", "unknown split method 'uneven'; expected even or flops"},
      {"sim --model gpt-99b", "--model: 'gpt-99b' is neither a preset (gpt2-small, gpt-1.3b, gpt-2.7b"},
      {"sim " + kSmall + "--device h100", "--device: 'h100' is not a profile"},
      {"sim " + kSmall + "--device zorse:tpu", "has no GPU type 'tpu'"},
      {"sim " + kSmall + "--schedule pipedream", "--schedule: 'pipedream' is neither a schedule (gpipe, 1f1b"},
      {"sim --model gpt-1.3b --seq 3 --segments 4", "cannot be cut into 4 segments"},
      {"sim --model gpt-7b --pp 4 --recompute 9", "recompute: virtual stage 0 has 8 layers, cannot recompute 9"},
      {"sim " + kSmall + "--recompute most", "--recompute: expected none, full, a number of layers per stage"},
      {"sim --model gpt-1.3b --seq 4096 --segments 2048,1024", "--segments: the lengths sum to 3072 tokens, but --seq is 4096"},
      {"sim --model gpt-1.3b --segments 2048,0", "--segments: expected an integer in [1, "},
      {"sim " + kSmall + "--split even:8", "--split: only flops takes a rounding multiple"},
      {"sim " + kSmall + "--split flops:x", "--split: expected an integer in [1, "},
      {"sim " + kSmall + "--dp 2", "--dp: data-parallel replicas are simulated only with --documents"},
      {"sim --model gpt-1.3b --seq 4096 --schedule " + malformed,
       malformed + ": line 2, column 10: expected a segment number after '.' (in 'BW0.x')"},
      {"sim --model gpt-1.3b --seq 4096 --pp 3 --schedule " +
           write_test_file("two.txt", "F0.0 BW0.0\nF0.0 BW0.0\n"),
       "the schedule has 2 for --pp but --pp 3 was given"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_plait(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.rfind("plait: error: ", 0), 0u) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "expected one line: " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
  }
}

// --documents with --dp: the loader reads every replica's micro-batches, each replica's pipeline
// is timed on its own and the table adds the replicas' spread of sum(doc^2).
TEST(SimCli, DocumentsOverDataParallelReplicas) {
  const std::string args = "sim --model gpt-1.3b --pp 2 --microbatches 2 --microbatch-size 2 --seq 2048 "
                           "--documents lognormal:300:2.0 --document-steps 4 ";
  const CommandResult one = run_plait(args);
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(one.out.find("max/mean per replica"), std::string::npos) << one.out;
  const CommandResult two = run_plait(args + "--dp 2");
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("4 steps of 2 x 2 on each of 2 data-parallel replicas"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("max/mean per replica"), std::string::npos) << two.out;
}

// --segments takes the lengths themselves (--seq defaults to their sum), and --split flops a
// rounding multiple.
TEST(SimCli, SegmentLengthsAndRoundedSplits) {
  const CommandResult given = run_plait("sim --model gpt-7b --pp 8 --microbatches 8 --segments 11040,8416,7080,6232");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_NE(given.out.find("sequence   32768 tokens, micro-batch size 1, given segment lengths"), std::string::npos)
      << given.out;
  EXPECT_NE(given.out.find("segments   lengths 11040 8416 7080 6232;"), std::string::npos) << given.out;
  const CommandResult rounded = run_plait("sim --model gpt-7b --pp 8 --microbatches 8 --segments 4 --seq 32768 --split flops:8");
  ASSERT_EQ(rounded.status, 0) << rounded.err;
  EXPECT_NE(rounded.out.find("flops split (lengths multiples of 8)"), std::string::npos) << rounded.out;
  const std::size_t at = rounded.out.find("segments   lengths ");
  ASSERT_NE(at, std::string::npos) << rounded.out;
  std::istringstream lengths(rounded.out.substr(at + 19, rounded.out.find(';', at) - at - 19));
  long long total = 0;
  for (long long len; lengths >> len;) {
    EXPECT_EQ(len % 8, 0) << rounded.out;
    total += len;
  }
  EXPECT_EQ(total, 32768);
  // Whole-micro-batch schedules in --compare still run one segment of the whole sequence.
  const CommandResult compare = run_plait("sim --model gpt-1.3b --pp 4 --microbatches 4 --segments 2048,1024,1024 --compare");
  ASSERT_EQ(compare.status, 0) << compare.err;
  EXPECT_NE(compare.out.find("seq1f1b         1  3"), std::string::npos) << compare.out;
  EXPECT_NE(compare.out.find("1f1b            1  1"), std::string::npos) << compare.out;
}

TEST(SimCli, ScheduleTextFiles) {
  const CommandResult ok = run_plait("sim --model gpt-1.3b --seq 2048 --schedule " +
                                     write_test_file("ok.txt", "F0.0 F1.0 BW0.0 BW1.0\nF0.0 BW0.0 F1.0 BW1.0\n"));
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("ok.txt (schedule text)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("2 ranks, 1 chunk(s) per rank, 2 virtual stages"), std::string::npos) << ok.out;
  // Well-formed but deadlocking: the grid, then the one-line error.
  const CommandResult bad = run_plait("sim --model gpt-1.3b --seq 2048 --schedule " +
                                      write_test_file("crossed.txt", "F0.0 BW0.0 F1.0 BW1.0\nF1.0 BW1.0 F0.0 BW0.0\n"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("<-- ERROR HERE (rank 0)"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("\nplait: error: schedule rule deadlock: rank 0, step 1 (BW0.0)"), std::string::npos) << bad.err;
}

// --compare prints the table and writes one trace and one HTML file per simulated schedule.
TEST(SimCli, CompareWritesOneTimelinePairPerSchedule) {
  const std::string dir = testing::TempDir() + "/plait_sim_compare";
  std::filesystem::create_directories(dir);
  // m = 8 >= 2p, so DualPipeV runs too and every family is simulated.
  const CommandResult r = run_plait("sim --compare --model gpt-1.3b --pp 4 --microbatches 8 --seq 4096 --segments 2 --trace " +
                                    dir + "/t.json --html " + dir + "/t.html");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("schedule        v  k  step time    bubble  in flight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device     a100-80gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak memory per pipeline rank"), std::string::npos) << r.out;
  for (const schedule::ScheduleFamily& f : schedule::schedule_families()) {
    const std::string trace = dir + "/t." + f.name + ".json", html = dir + "/t." + f.name + ".html";
    ASSERT_TRUE(std::filesystem::exists(trace)) << trace;
    ASSERT_TRUE(std::filesystem::exists(html)) << html;
    const nlohmann::json j = nlohmann::json::parse(test::file_bytes(trace));
    EXPECT_GT(j.at("traceEvents").size(), 10u) << trace;
    EXPECT_NE(test::file_bytes(html).find("<svg"), std::string::npos);
    EXPECT_NE(r.out.find("wrote " + html), std::string::npos) << r.out;
  }
}

// A simulation whose memory estimate exceeds what there is never starts: it says the estimate
// and how it was made (units x measured bytes, docs/simulator.md) and what to change.
TEST(SimCli, RefusesASimulationLargerThanTheMemoryStatingTheEstimate) {
  const CommandResult r = run_plait("sim --microbatches 65536 --max-memory 64MiB");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("plait: error: this simulation would hold about 540.00 MiB (2097152 units: 8 ranks x 1 "
                       "chunk(s) x 65536 micro-batches x 4 segment(s) at ~270 bytes each, docs/simulator.md), more "
                       "than the 64.00 MiB of --max-memory; simulate fewer --microbatches"),
            std::string::npos)
      << r.err;
  // Timelines record every event: more per unit, and the advice says so.
  const CommandResult t = run_plait("sim --microbatches 16384 --max-memory 64MiB --trace " + test::test_file("t.json"));
  EXPECT_EQ(t.status, 1);
  EXPECT_NE(t.err.find("at ~900 bytes each"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find(", or without --trace/--html"), std::string::npos) << t.err;
  // --compare keeps every schedule's report: the sum (here 4 ranks, v = 2, k = 4, m = 8192:
  // 32768 units per micro-batch-level family, more for the others).
  const CommandResult c = run_plait("sim --compare --pp 4 --microbatches 8192 --max-memory 64MiB");
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.err.find("every schedule's report is kept"), std::string::npos) << c.err;
  // Within the limit it runs.
  const CommandResult ok = run_plait("sim " + kSmall + "--max-memory 64MiB");
  EXPECT_EQ(ok.status, 0) << ok.err;
  // Without --max-memory the limit is the memory the machine has available: the flag's largest
  // value (2^24 micro-batches, ~135 GiB) is refused wherever less is available.
  const std::optional<AvailableMemory> available = available_memory();
  if (available && available->bytes < 135.0 * (1 << 30)) {
    const CommandResult most = run_plait("sim --microbatches 16777216");
    EXPECT_EQ(most.status, 1);
    EXPECT_NE(most.err.find("would hold about 135.00 GiB"), std::string::npos) << most.err;
    EXPECT_NE(most.err.find("this machine has available (" + available->source), std::string::npos) << most.err;
  }
}

// Progress on stderr: the phases of each schedule of --compare, counted in schedules (shown
// from the start with --progress always; by default only after 2 s; never with never).
TEST(SimCli, ShowsProgressOfItsPhasesAndSchedules) {
  const CommandResult r = run_plait("sim " + kSmall + "--compare --progress always");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::size_t families = schedule::schedule_families().size();
  EXPECT_NE(r.err.find("plait: comparing schedules, gpipe: generating the schedule [0/" + std::to_string(families) + "]"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("plait: comparing schedules, zb-v: timing ["), std::string::npos) << r.err;
  const CommandResult one = run_plait("sim " + kSmall + "--progress always");
  EXPECT_NE(one.err.find("plait: seq1f1b: timing [3/4] after "), std::string::npos) << one.err;
  const CommandResult quiet = run_plait("sim " + kSmall + "--compare --progress never");
  EXPECT_EQ(quiet.err, "");
  const CommandResult bad = run_plait("sim " + kSmall + "--progress sometimes");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--progress: expected auto, always or never, found 'sometimes'"), std::string::npos) << bad.err;
}

TEST(SimCli, BenchPrintsPhaseTimes) {
  const CommandResult r = run_plait("bench sim --pp 8 --microbatches 16 --segments 2 --repeat 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("plait bench sim: seq1f1b, p=8 v=1 m=16 k=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("best of 1: generate "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace plait::sim
