// `plait train` under mpirun with token shards, checkpoints and faults, end to end through the
// binary (tests/mpi/run_mpi_test.sh starts each job: one thread per rank, --oversubscribe):
//
// - a rank SIGKILLed while the job saves a checkpoint (after writing its file, before the
//   commit; the coordinator rank 0 or another) stops the job non-zero within 10 s, named by
//   mpirun; `latest` still names the previous checkpoint, which loads (sizes, CRC-32C, headers),
//   and `--resume` from it reproduces the uninterrupted run's losses and final files bit for bit;
// - a rank SIGKILLed during the validation pass stops the job the same way;
// - a NaN loss stops the job with one line naming the step and the rank (abort), or is skipped
//   with a warning and the run finishes (skip);
// - a checkpoint of 4 pipeline stages continues on 2 (--pp 2), the next step's loss matching;
// - --resume DIR without --config runs the checkpoint's own config; a corrupted file is refused
//   naming the file and its checksum;
// - the default thread count under mpirun is the hardware threads shared by the local ranks.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/checkpoint/checkpoint_store.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// step -> the JSON line of --metrics, split by kind.
struct Metrics {
  std::map<int, std::string> train, val;
};

Metrics read_metrics(const fs::path& p) {
  Metrics m;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    (j.contains("val_loss") ? m.val : m.train)[j.at("step").get<int>()] = line;
  }
  return m;
}

double loss_of(const std::string& line) { return nlohmann::json::parse(line).at("loss").get<double>(); }

class TrainCheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("plait_ckpt_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A small corpus of pseudo-English lines, prepared into byte-level shards.
    std::mt19937 rng(5);
    const char* words[] = {"the", "pipeline", "stage", "sends", "a", "gradient", "to", "its",
                           "neighbour", "while", "another", "micro-batch", "runs", "forward"};
    std::ofstream text(dir_ / "corpus.txt");
    for (int line = 0; line < 1500; ++line) {
      for (int w = 0; w < 8; ++w) text << words[rng() % 14] << (w == 7 ? ".\n" : " ");
    }
    text.close();
    const Result prep = plait("data prepare --tokenizer byte --quiet --shard-tokens 30000 --out " +
                              (dir_ / "shards").string() + " " + (dir_ / "corpus.txt").string());
    ASSERT_EQ(prep.status, 0) << prep.err;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // The plait binary without mpirun.
  Result plait(const std::string& args) {
    return shell(std::string(PLAIT_BINARY) + " " + args);
  }
  // `mpirun -np ranks plait train ...` through the MPI test runner (it checks nothing here:
  // --expect-failure only flips its verdict; the test reads the job's own exit status from
  // its report line).
  Result train(int ranks, const std::string& args) {
    return shell("bash " PLAIT_MPI_RUNNER " --timeout 60 --ranks " + std::to_string(ranks) + " -- " +
                 PLAIT_BINARY + " train " + args);
  }
  Result shell(const std::string& cmd) {
    const std::string full = cmd + " >" + (dir_ / "out").string() + " 2>" + (dir_ / "err").string();
    Result r;
    const int raw = std::system(full.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(dir_ / "out");
    r.err = slurp(dir_ / "err");
    return r;
  }
  // The job's own exit status and seconds, from the runner's report line.
  static std::pair<int, double> job_status(const Result& r) {
    const std::string key = " ranks: exit status ";  // not "FAIL: expected exit status 0"
    const std::size_t at = r.err.rfind(key);
    if (at == std::string::npos) return {-1, 0};
    const int status = std::atoi(r.err.c_str() + at + key.size());
    const std::size_t after = r.err.find(" after ", at);
    return {status, std::atof(r.err.c_str() + after + 7)};
  }

  // pp 2 (or `pp`) Seq1F1B, 6 steps, validation and a checkpoint every 2 steps.
  fs::path config(const std::string& name, int pp = 2, const std::string& extra_train = "") {
    const fs::path p = dir_ / name;
    std::ofstream(p) << R"({"model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
 "train": {"steps": 6, "seq": 32, "microbatch_size": 2, "microbatches": 4, "lr": 0.003,
           "segments": 2, "eval_every": 2, "eps": 0.001)" + extra_train + R"(},
 "data": {"shards": ")" + (dir_ / "shards").string() + R"(", "tokenizer": "byte"},
 "checkpoint": {"dir": ")" + (dir_ / name).replace_extension("ckpt").string() + R"(", "every": 2},
 "parallel": {"schedule": "seq1f1b", "pp": )" + std::to_string(pp) + "}}";
    return p;
  }

  fs::path dir_;
};

TEST_F(TrainCheckpointCli, KillDuringSaveLeavesThePreviousCheckpointAndResumeIsExact) {
  const fs::path whole = config("whole.json");
  const Result reference = train(2, "--config " + whole.string() + " --metrics " + (dir_ / "whole.jsonl").string());
  ASSERT_EQ(job_status(reference).first, 0) << reference.err;
  const Metrics want = read_metrics(dir_ / "whole.jsonl");
  ASSERT_EQ(want.train.size(), 6u);

  for (int victim : {1, 0}) {  // another rank, then the coordinator
    SCOPED_TRACE("rank " + std::to_string(victim) + " killed");
    const fs::path cfg = config("killed" + std::to_string(victim) + ".json");
    const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
    const fs::path metrics = dir_ / ("killed" + std::to_string(victim) + ".jsonl");
    const Result killed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() +
                                       " --inject-failure " + std::to_string(victim) + ":4:kill-in-save");
    const auto [status, seconds] = job_status(killed);
    EXPECT_NE(status, 0);
    EXPECT_LE(seconds, 10.0);
    EXPECT_NE(killed.err.find("rank " + std::to_string(victim) +
                              ": step 4: killing itself with SIGKILL after writing its checkpoint files"),
              std::string::npos)
        << killed.err;
    EXPECT_NE(killed.err.find("process rank " + std::to_string(victim) + " with PID"), std::string::npos)
        << killed.err;
    // The save of step 4 never completed: `latest` names step 2, which loads.
    EXPECT_TRUE(fs::exists(ckpt / "step_00000004.partial"));
    EXPECT_FALSE(fs::exists(ckpt / "step_00000004"));
    const std::optional<std::string> latest = plait::checkpoint::latest_checkpoint(ckpt.string());
    ASSERT_TRUE(latest);
    EXPECT_EQ(fs::path(*latest).filename(), "step_00000002");
    const plait::checkpoint::CheckpointReader reader(*latest);
    EXPECT_EQ(reader.manifest().step, 2);

    const Result resumed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume");
    ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from " + (ckpt / "step_00000002").string() + ": step 2"), std::string::npos)
        << resumed.out;
    const Metrics got = read_metrics(metrics);
    for (const auto& [step, line] : want.train) EXPECT_EQ(got.train.at(step), line) << "step " << step;
    for (const auto& [step, line] : want.val) EXPECT_EQ(got.val.at(step), line) << "validation, step " << step;
    for (const char* file : {"stage_0.safetensors", "stage_1.safetensors"}) {
      EXPECT_EQ(slurp(ckpt / "step_00000006" / file),
                slurp(fs::path(whole).replace_extension("ckpt") / "step_00000006" / file))
          << file;
    }
    EXPECT_FALSE(fs::exists(ckpt / "step_00000004.partial"));  // removed by the next commit
  }
}

TEST_F(TrainCheckpointCli, KillDuringValidationStopsTheJobNamingTheRank) {
  const Result r = train(2, "--config " + config("eval.json").string() + " --inject-failure 1:2:kill-in-eval");
  const auto [status, seconds] = job_status(r);
  EXPECT_NE(status, 0);
  EXPECT_LE(seconds, 10.0);
  EXPECT_NE(r.err.find("rank 1: step 2: killing itself with SIGKILL during evaluation"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("process rank 1 with PID"), std::string::npos) << r.err;
}

TEST_F(TrainCheckpointCli, NanLossAbortsWithOneLineOrIsSkipped) {
  const Result abort = train(2, "--config " + config("abort.json").string() + " --inject-failure 1:3:nan-loss");
  EXPECT_NE(job_status(abort).first, 0);
  EXPECT_NE(abort.err.find("plait: error: rank 0: step 3: non-finite loss (NaN or infinite) on rank 1; "
                           "stopping (train.on_nonfinite is \"abort\""),
            std::string::npos)
      << abort.err;
  std::size_t errors = 0;
  for (std::size_t at = abort.err.find("plait: error:"); at != std::string::npos;
       at = abort.err.find("plait: error:", at + 1)) {
    ++errors;
  }
  EXPECT_EQ(errors, 1u) << abort.err;  // rank 0 alone reports what every rank found

  const Result skip = train(2, "--config " + config("skip.json", 2, R"(, "on_nonfinite": "skip")").string() +
                                   " --inject-failure 0:3:nan-grad --metrics " + (dir_ / "skip.jsonl").string());
  ASSERT_EQ(job_status(skip).first, 0) << skip.err;
  EXPECT_NE(skip.err.find("plait: warning: step 3: NaN gradient in wte on stage 0"), std::string::npos) << skip.err;
  EXPECT_NE(skip.err.find("skipped its update"), std::string::npos);
  EXPECT_NE(skip.out.find("(1 non-finite step(s) skipped)"), std::string::npos) << skip.out;
  const Metrics m = read_metrics(dir_ / "skip.jsonl");
  EXPECT_NE(m.train.at(3).find("\"skipped\":true"), std::string::npos);
  EXPECT_NE(m.train.at(4).find("\"skipped\":false"), std::string::npos);
}

TEST_F(TrainCheckpointCli, FourStagesContinueOnTwoAndWithTheCheckpointsOwnConfig) {
  const fs::path four = config("four.json", 4);
  const Result whole = train(4, "--config " + four.string() + " --metrics " + (dir_ / "four.jsonl").string());
  ASSERT_EQ(job_status(whole).first, 0) << whole.err;
  const Metrics want = read_metrics(dir_ / "four.jsonl");

  // --resume DIR without --config: the checkpoint's config (pp 4, its checkpoint directory would
  // be written again, so stop where it is); with --pp 2 on 2 ranks from step 2.
  const fs::path step2 = fs::path(four).replace_extension("ckpt") / "step_00000002";
  const Result two = train(2, "--resume " + step2.string() + " --pp 2 --metrics " + (dir_ / "two.jsonl").string() +
                                  " --stop-at 4");
  // The checkpoint's own config names its directory, which holds newer checkpoints: refused.
  EXPECT_NE(job_status(two).first, 0);
  EXPECT_NE(two.err.find("checkpoint.dir: " + fs::path(four).replace_extension("ckpt").string() +
                         " already holds checkpoints up to step_00000006"),
            std::string::npos)
      << two.err;
  const fs::path cfg2 = config("two.json", 2);
  const Result resumed = train(2, "--config " + cfg2.string() + " --resume " + step2.string() + " --metrics " +
                                      (dir_ / "two.jsonl").string());
  ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
  const Metrics got = read_metrics(dir_ / "two.jsonl");
  // Step 2: the same parameters on another cut (only the loss sum's order may differ); step 3:
  // after an update whose fp32 gradient sums were associated differently.
  EXPECT_NEAR(loss_of(got.train.at(2)), loss_of(want.train.at(2)), 1e-12 * loss_of(want.train.at(2)));
  EXPECT_NEAR(loss_of(got.train.at(3)), loss_of(want.train.at(3)), 1e-6 * loss_of(want.train.at(3)));

  // Without --config: the checkpoint's own config (its pp 4 layout and directory).
  const Result own = train(4, "--resume " + (dir_ / "two.ckpt").string() + " --stop-at 7 --steps 8");
  EXPECT_NE(job_status(own).first, 0);  // two.ckpt's config is pp 2: 4 ranks are refused
  EXPECT_NE(own.err.find("parallel.pp: the layout needs 2 ranks (pp 2 x dp 1) but the job has 4"), std::string::npos)
      << own.err;
  const Result own2 = train(2, "--resume " + (dir_ / "two.ckpt").string() + " --steps 8");
  ASSERT_EQ(job_status(own2).first, 0) << own2.err;
  EXPECT_NE(own2.out.find("resumed from " + (dir_ / "two.ckpt" / "step_00000006").string() + ": step 6"),
            std::string::npos)
      << own2.out;
  EXPECT_TRUE(fs::exists(dir_ / "two.ckpt" / "step_00000008"));
}

TEST_F(TrainCheckpointCli, ACorruptedCheckpointIsRefusedNamingTheFile) {
  const fs::path cfg = config("corrupt.json");
  ASSERT_EQ(job_status(train(2, "--config " + cfg.string() + " --stop-at 2")).first, 0);
  const fs::path file = fs::path(cfg).replace_extension("ckpt") / "step_00000002" / "stage_1.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const Result r = train(2, "--config " + cfg.string() + " --resume");
  EXPECT_NE(job_status(r).first, 0);
  EXPECT_NE(r.err.find(file.string() + ": (checksum): the manifest's CRC-32C is 0x"), std::string::npos) << r.err;
}

TEST_F(TrainCheckpointCli, ThreadsPerRankDefaultToTheHardwareSharedByTheLocalRanks) {
  const fs::path cfg = config("threads.json");
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const std::string expected = "threads: " + std::to_string(std::max(1u, hardware / 2)) + " per rank (" +
                               std::to_string(hardware) + " hardware threads / 2 ranks on this node)";
  const Result r = shell(std::string("env -u OMP_NUM_THREADS mpirun -np 2 --oversubscribe --bind-to none ") +
                         (::geteuid() == 0 ? "--allow-run-as-root " : "") + PLAIT_BINARY + " train --config " +
                         cfg.string() + " --stop-at 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
}

}  // namespace
