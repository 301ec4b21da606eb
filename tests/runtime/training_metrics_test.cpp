// The --metrics file and `plait report` (runtime/training_metrics.h, trace/html_report.h): a file
// of every record kind reads back; bad lines are one error naming the line and field; the report
// charts the loss, validation loss, learning rate, gradient norm and tokens/s and tables the
// memory; `plait train --metrics` writes what `plait report` reads, and the HTML page is
// self-contained.
#include "plait/runtime/training_metrics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plait/core/error.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace plait::runtime {
namespace {

namespace fs = std::filesystem;

class TrainingMetricsTest : public plait::test::TempDirTest {
 protected:
  std::string error_of(const std::string& text) {
    put(path("m.jsonl"), text);
    try {
      read_training_metrics(path("m.jsonl"));
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  const trace::ReportChart& chart(const trace::Report& r, const std::string& title) {
    for (const trace::ReportChart& c : r.charts) {
      if (c.title == title) return c;
    }
    ADD_FAILURE() << "no chart " << title;
    return r.charts.front();
  }
};

const char* kFile =
    R"({"run":{"config":"run.json","model":"gpt2 2 layers","parameters":1000,"ranks":2,"schedule":"1f1b","precision":"fp32","tokens_per_step":64,"start_step":0,"stages":["0","1"]}})"
    "\n"
    R"({"step":0,"val_loss":5.5})"
    "\n"
    R"({"grad_norm":2.5,"loss":5.4,"lr":0.001,"perf":{"peak_memory_bytes":[1000,900],"step_seconds":0.5,"tokens_per_second":128.0},"skipped":false,"step":0})"
    "\n"
    R"({"grad_norm":1.5,"loss":4.9,"lr":0.002,"perf":{"peak_memory_bytes":[1100,950],"step_seconds":0.25,"tokens_per_second":256.0},"skipped":false,"step":1})"
    "\n"
    R"({"sample":"hello\nworld","step":1})"
    "\n"
    R"({"grad_norm":1.0,"loss":4.5,"lr":0.002,"skipped":false,"step":2})"
    "\n"
    R"({"step":3,"val_loss":4.4})"
    "\n"
    R"({"memory":[{"rank":0,"stages":"0","peak_bytes":{"parameters":10,"gradients":10,"optimizer_state":20,"activations":30,"kv_cache":5,"comm_buffers":1},"peak_total_bytes":70,"capacity_bytes":null},)"
    R"({"rank":1,"stages":"1","peak_bytes":{"parameters":9,"gradients":9,"optimizer_state":18,"activations":20,"kv_cache":4,"comm_buffers":1},"peak_total_bytes":60,"capacity_bytes":1048576}]})"
    "\n";

TEST_F(TrainingMetricsTest, ReadsEveryRecordAndChartsThem) {
  put(path("m.jsonl"), kFile);
  const TrainingMetrics m = read_training_metrics(path("m.jsonl"));
  ASSERT_EQ(m.steps.size(), 3u);
  EXPECT_EQ(m.steps[1].loss, 4.9);
  EXPECT_EQ(*m.steps[1].tokens_per_second, 256.0);
  EXPECT_EQ(m.steps[1].peak_memory_bytes, (std::vector<double>{1100, 950}));
  EXPECT_FALSE(m.steps[2].step_seconds.has_value());  // an older line without perf
  EXPECT_EQ(m.validations.size(), 2u);
  EXPECT_EQ(m.samples.at(0).second, "hello\nworld");
  ASSERT_EQ(m.memory.size(), 2u);
  EXPECT_EQ(m.memory[1].peak[3], 20);
  EXPECT_EQ(*m.memory[1].capacity, 1048576);
  EXPECT_FALSE(m.memory[0].capacity.has_value());

  const trace::Report r = training_report(m);
  EXPECT_EQ(r.title, "plait training report: gpt2 2 layers");
  const trace::ReportChart& loss = chart(r, "Loss");
  ASSERT_EQ(loss.series.size(), 2u);
  EXPECT_EQ(loss.series[0].points.size(), 3u);
  EXPECT_EQ(loss.series[1].points, (std::vector<std::pair<double, double>>{{0, 5.5}, {3, 4.4}}));
  EXPECT_EQ(chart(r, "Learning rate").series[0].points.size(), 3u);
  EXPECT_TRUE(chart(r, "Gradient norm").log_y);
  EXPECT_EQ(chart(r, "Throughput").series[0].points.size(), 2u);
  ASSERT_GE(r.tables.size(), 2u);
  EXPECT_EQ(r.tables[0].rows.size(), 2u);
  EXPECT_EQ(r.tables[0].rows[1].back(), "1.00 MiB");

  std::ostringstream html;
  trace::write_html_report(r, html);
  const std::string page = html.str();
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);  // nothing loaded from elsewhere
  EXPECT_EQ(std::count(page.begin(), page.end(), '\n') > 10, true);
  EXPECT_NE(page.find("<polyline"), std::string::npos);
  EXPECT_NE(page.find("validation loss at 3: 4.4"), std::string::npos);  // a dot's hover title
  EXPECT_NE(page.find("Peak memory by rank and category"), std::string::npos);
}

TEST_F(TrainingMetricsTest, ReadsEachRanksTimesAndStragglerRecordsAndTablesThem) {
  put(path("s.jsonl"),
      R"({"grad_norm":1,"loss":4,"lr":0.001,"perf":{"peak_memory_bytes":[1,2],"step_seconds":0.5,"tokens_per_second":128.0,)"
      R"("seconds_per_unit":[0.001,0.003],"wait_seconds":[0.2,0.01]},"skipped":false,"step":7})"
      "\n"
      R"({"step":7,"straggler":{"rank":1,"flagged":true,"vs_history":3.02,"vs_peers":2.97}})"
      "\n"
      R"({"step":7,"rebalance":{"stages":[0],"ranks":[0,1],"before":[4,4],"after":[6,2],"rank":1,"flagged":true,)"
      R"("slowdown":3.02,"decide_seconds":0.00025}})"
      "\n"
      R"({"step":30,"straggler":{"rank":1,"flagged":false,"vs_history":1.01,"vs_peers":0.99}})"
      "\n");
  const TrainingMetrics m = read_training_metrics(path("s.jsonl"));
  EXPECT_EQ(m.steps.at(0).seconds_per_unit, (std::vector<double>{0.001, 0.003}));
  EXPECT_EQ(m.steps.at(0).wait_seconds, (std::vector<double>{0.2, 0.01}));
  ASSERT_EQ(m.stragglers.size(), 2u);
  EXPECT_EQ(m.stragglers[0].rank, 1);
  EXPECT_TRUE(m.stragglers[0].flagged);
  EXPECT_FALSE(m.stragglers[1].flagged);
  EXPECT_EQ(m.stragglers[1].step, 30);
  const trace::Report r = training_report(m);
  const auto t = std::find_if(r.tables.begin(), r.tables.end(),
                              [](const trace::ReportTable& x) { return x.title == "Stragglers (flagged and cleared)"; });
  ASSERT_NE(t, r.tables.end());
  EXPECT_EQ(t->rows.at(0), (std::vector<std::string>{"7", "1", "flagged", "3.02x", "2.97x"}));
  // The re-balance: tabled, and a dot on the throughput of its step.
  ASSERT_EQ(m.rebalances.size(), 1u);
  EXPECT_EQ(m.rebalances[0].after, (std::vector<std::int64_t>{6, 2}));
  const auto moved = std::find_if(r.tables.begin(), r.tables.end(),
                                  [](const trace::ReportTable& x) { return x.title.starts_with("Re-balances"); });
  ASSERT_NE(moved, r.tables.end());
  EXPECT_EQ(moved->rows.at(0), (std::vector<std::string>{"7", "0", "0, 1", "4/4 -> 6/2", "rank 1 flagged 3.02x", "0.25 ms"}));
  const trace::ReportChart& rate = r.charts.back();
  ASSERT_EQ(rate.series.size(), 2u);
  EXPECT_EQ(rate.series[1].points, (std::vector<std::pair<double, double>>{{7.0, 128.0}}));
  EXPECT_EQ(error_of(R"({"step":7,"rebalance":{"stages":[0],"ranks":[0,1],"before":[4],"after":[6,2],"rank":1,)"
                     R"("slowdown":3,"decide_seconds":0}})" "\n"),
            path("m.jsonl") + ": line 1.rebalance.after: expected as many shares before and after as ranks (2)");
}

TEST_F(TrainingMetricsTest, ReadsLayerMovesMadeAndDeclinedAndTablesThem) {
  put(path("l.jsonl"),
      R"({"grad_norm":1,"loss":4,"lr":0.001,"perf":{"peak_memory_bytes":[1,2],"step_seconds":0.5,"tokens_per_second":64.0},)"
      R"("skipped":false,"step":12})"
      "\n"
      R"({"step":12,"move_layers":{"made":true,"from":1,"to":0,"layers":2,"before":[4,4,4,4],"after":[6,2,4,4],"rank":1,)"
      R"("flagged":true,"slowdown":3.31,"bytes":4760000,"cost_seconds":0.55,"saved_per_step":1.4159,"horizon":27,)"
      R"("gain_seconds":38.23,"seconds":0.611,"transfer_seconds":0.061,"why":""}})"
      "\n"
      R"({"step":4,"move_layers":{"made":false,"from":1,"to":0,"layers":2,"before":[4,4],"after":[6,2],"rank":1,)"
      R"("flagged":true,"slowdown":3.81,"bytes":304000,"cost_seconds":0.763,"saved_per_step":0.0085,"horizon":9,)"
      R"("gain_seconds":0.077,"seconds":0,"transfer_seconds":0,"why":"moving costs more than it saves over the horizon"}})"
      "\n");
  const TrainingMetrics m = read_training_metrics(path("l.jsonl"));
  ASSERT_EQ(m.moves.size(), 2u);
  EXPECT_TRUE(m.moves[0].made);
  EXPECT_EQ(m.moves[0].after, (std::vector<std::int64_t>{6, 2, 4, 4}));
  EXPECT_EQ(m.moves[0].horizon, 27);
  EXPECT_FALSE(m.moves[1].made);
  EXPECT_EQ(m.moves[1].why, "moving costs more than it saves over the horizon");
  const trace::Report r = training_report(m);
  const auto t = std::find_if(r.tables.begin(), r.tables.end(),
                              [](const trace::ReportTable& x) { return x.title.starts_with("Layer moves"); });
  ASSERT_NE(t, r.tables.end());
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].at(1), "moved 2 from stage 1 to 0");
  EXPECT_EQ(t->rows[0].at(2), "4/4/4/4 -> 6/2/4/4");
  EXPECT_EQ(t->rows[0].at(6), "0.611 s (0.061 s sending)");
  EXPECT_EQ(t->rows[1].at(1), "declined 2 from stage 1 to 0");
  EXPECT_EQ(t->rows[1].at(6), "moving costs more than it saves over the horizon");
  // The move made: a dot on the throughput of its step (the declined one is not).
  const trace::ReportChart& rate = r.charts.back();
  ASSERT_EQ(rate.series.size(), 3u);
  EXPECT_EQ(rate.series[2].points, (std::vector<std::pair<double, double>>{{12.0, 64.0}}));
  EXPECT_NE(error_of(R"({"step":4,"move_layers":{"made":true,"from":1,"to":0,"layers":2,"before":[4,4],"after":[6],"rank":1,)"
                     R"("flagged":true,"slowdown":3,"bytes":1,"cost_seconds":0,"saved_per_step":0,"horizon":1,)"
                     R"("gain_seconds":0,"seconds":0,"transfer_seconds":0,"why":""}})" "\n")
                .find("line 1.move_layers.after: expected as many stages after as before (2)"),
            std::string::npos);
}

TEST_F(TrainingMetricsTest, BadLinesAreOneErrorNamingTheLine) {
  const std::string f = path("m.jsonl");
  EXPECT_EQ(error_of("{\"step\":0,\"val_loss\":1}\n{\"step\":1,\"loss\":\"x\",\"grad_norm\":1,\"lr\":1}\n"),
            f + ": line 2.loss: expected a number, found string \"x\"");
  EXPECT_EQ(error_of("{\"step\":0,\"val_loss\":1,\"extra\":2}\n"), f + ": line 1.extra: unknown field");
  EXPECT_EQ(error_of("{\"what\":1}\n"),
            f + ": line 1: expected a step (loss), validation (val_loss), sample, straggler, rebalance, move_layers, run or "
                "memory record");
  EXPECT_NE(error_of("{\"step\":0,\n").find(f + ": line 1: (syntax)"), std::string::npos) << error_of("{\"step\":0,\n");
}

TEST_F(TrainingMetricsTest, PlaitTrainWritesWhatPlaitReportReads) {
  std::ofstream(path("corpus.txt")) << "the quick brown fox. " << std::string(800, 'q');
  put(path("run.json"), R"({"model": {"layers": 2, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 32},
      "train": {"steps": 4, "seq": 16, "microbatch_size": 2, "eval_every": 2, "sample_every": 2, "sample_tokens": 8},
      "data": {"paths": [")" + path("corpus.txt") + R"("], "val_paths": [")" + path("corpus.txt") + R"("]}})");
  const plait::test::CommandResult t =
      plait::test::run_plait("train --config " + path("run.json") + " --metrics " + path("m.jsonl"), "OMP_NUM_THREADS=1");
  ASSERT_EQ(t.status, 0) << t.err;
  const TrainingMetrics m = read_training_metrics(path("m.jsonl"));
  ASSERT_EQ(m.steps.size(), 4u);
  for (const MetricsStep& s : m.steps) {
    EXPECT_GT(*s.step_seconds, 0);
    EXPECT_NEAR(*s.tokens_per_second, 32 / *s.step_seconds, 1e-6 * *s.tokens_per_second);
    ASSERT_EQ(s.peak_memory_bytes.size(), 1u);
    EXPECT_GT(s.peak_memory_bytes[0], 0);
  }
  EXPECT_EQ(m.validations.size(), 3u);  // before steps 0 and 2, after the last
  EXPECT_EQ(m.samples.size(), 2u);
  ASSERT_EQ(m.memory.size(), 1u);
  EXPECT_EQ(m.memory[0].peak_total, m.steps.back().peak_memory_bytes[0]);
  ASSERT_EQ(m.runs.size(), 1u);
  EXPECT_EQ(m.runs[0].at("tokens_per_step"), 32);

  const plait::test::CommandResult r =
      plait::test::run_plait("report --metrics " + path("m.jsonl") + " --html " + path("out/report.html"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("steps: 4 (0..3)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Peak memory by rank and category:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + path("out/report.html")), std::string::npos) << r.out;
  const std::string page = bytes_of(path("out/report.html"));
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("Throughput"), std::string::npos);
  const plait::test::CommandResult bad = plait::test::run_plait("report --metrics " + path("nope.jsonl"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.err, "plait: error: " + path("nope.jsonl") + ": (file): cannot open the file\n");
}

}  // namespace
}  // namespace plait::runtime
