#pragma once
// The fixture of the `plait train` tests under mpirun (train_checkpoint_cli_test.cpp,
// train_signal_cli_test.cpp, train_recipe_cli_test.cpp): a temporary directory with byte-level
// token shards of a small pseudo-English corpus, configs of a small pp 2 Seq1F1B run with
// checkpoints, jobs started through tests/mpi/run_mpi_test.sh (one thread per rank,
// --oversubscribe), and comparisons of runs by their --metrics lines and checkpoint files.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/core/crc32c.h"

namespace plait_train_cli {


namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// step -> the JSON line of --metrics, split by kind.
struct Metrics {
  std::map<int, std::string> train, val;
};

inline Metrics read_metrics(const fs::path& p) {
  Metrics m;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    // The run and memory records and samples are not steps; a step's "perf" (time, memory) and
    // the straggler records (decided from measured times) are measured, not computed: the rest
    // of the line is what two runs must share bit for bit.
    if (!j.contains("step") || j.contains("sample") || j.contains("straggler")) continue;
    j.erase("perf");
    (j.contains("val_loss") ? m.val : m.train)[j.at("step").get<int>()] = j.dump();
  }
  return m;
}

inline double loss_of(const std::string& line) { return nlohmann::json::parse(line).at("loss").get<double>(); }

// Staging directories of `step` in a checkpoint root (step_<N>.partial-<run>).
inline std::size_t staging_dirs(const fs::path& root, int step) {
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "step_%08d.partial", step);
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(root)) n += e.path().filename().string().starts_with(prefix);
  return n;
}

inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Sets element `index` of tensor `name` in a checkpoint's file to `value` and records the file's
// new CRC-32C in the manifest: a checkpoint whose checksums all pass but whose state is bad (as
// one written by a run that diverged, or by an older plait that did not check).
inline void rewrite_tensor_value(const fs::path& step_dir, const std::string& file, const std::string& name,
                          std::size_t index, float value) {
  std::string bytes = slurp(step_dir / file);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[i]);
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, header));
  const std::size_t at = 8 + header + h.at(name).at("data_offsets")[0].get<std::size_t>() + 4 * index;
  std::memcpy(bytes.data() + at, &value, 4);
  std::ofstream(step_dir / file, std::ios::binary | std::ios::trunc) << bytes;
  nlohmann::json m = nlohmann::json::parse(slurp(step_dir / "manifest.json"));
  for (auto& f : m["files"]) {
    if (f["path"] != file) continue;
    f["crc32c"] = plait::crc32c_text(plait::crc32c(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  }
  std::ofstream(step_dir / "manifest.json", std::ios::trunc) << m.dump(2);
}

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

  // pp 2 (or `pp`) Seq1F1B, 6 steps (or `steps`), validation and a checkpoint every 2 steps (or
  // `every`).
  fs::path config(const std::string& name, int pp = 2, const std::string& extra_train = "",
                  const std::string& extra_checkpoint = "", int steps = 6, int every = 2) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << R"({"model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
 "train": {"steps": )" + std::to_string(steps) + R"(, "seq": 32, "microbatch_size": 2, "microbatches": 4, "lr": 0.003,
           "segments": 2, "eval_every": 2, "eps": 0.001)" + extra_train + R"(},
 "data": {"shards": ")" + (dir_ / "shards").string() + R"(", "tokenizer": "byte"},
 "checkpoint": {"dir": ")" + (dir_ / name).replace_extension("ckpt").string() + R"(", "every": )" +
                            std::to_string(every) + extra_checkpoint + R"(},
 "parallel": {"schedule": "seq1f1b", "pp": )" + std::to_string(pp) + "}}";
    return p;
  }

  // The uninterrupted 6-step run of config(name): its metrics and its final checkpoint.
  Metrics reference(const std::string& name = "whole.json") {
    const fs::path whole = config(name);
    const Result r = train(2, "--config " + whole.string() + " --metrics " + (dir_ / (name + ".jsonl")).string());
    EXPECT_EQ(job_status(r).first, 0) << r.err;
    return read_metrics(dir_ / (name + ".jsonl"));
  }
  // A resumed run's metrics and final checkpoint equal the reference's, bit for bit: every step
  // from `resumed_at` on, and those before it that the interrupted run recorded (a step whose
  // checkpoint was interrupted ends before its metrics line is written).
  void expect_same_run(const Metrics& want, const fs::path& metrics, const fs::path& ckpt, int resumed_at = 0,
                       const std::string& name = "whole.json") {
    const Metrics got = read_metrics(metrics);
    for (const auto& [step, line] : want.train) {
      if (step < resumed_at && !got.train.contains(step)) continue;
      ASSERT_TRUE(got.train.contains(step)) << "step " << step;
      EXPECT_EQ(got.train.at(step), line) << "step " << step;
    }
    for (const auto& [step, line] : want.val) {
      if (step < resumed_at && !got.val.contains(step)) continue;
      ASSERT_TRUE(got.val.contains(step)) << "validation, step " << step;
      EXPECT_EQ(got.val.at(step), line) << "validation, step " << step;
    }
    for (const char* file : {"stage_0.safetensors", "stage_1.safetensors"}) {
      EXPECT_EQ(slurp(ckpt / "step_00000006" / file),
                slurp((dir_ / name).replace_extension("ckpt") / "step_00000006" / file))
          << file;
    }
  }

  // A stalled job of 2 ranks with train.stall_timeout_s 2, rank 1 failing in step 3 as `how`
  // (stop, hang): it must end non-zero within a generous 30 s, with one error line, from the
  // watchdog. Without the watchdog such a job hung until the runner's timeout.
  Result stalled_job(const std::string& how) {
    const fs::path cfg = config(how + ".json", 2, R"(, "stall_timeout_s": 2)");
    const Result r = train(2, "--config " + cfg.string() + " --inject-failure 1:3:" + how);
    const auto [status, seconds] = job_status(r);
    EXPECT_NE(status, 0);
    EXPECT_LE(seconds, 30.0);
    EXPECT_EQ(count_of(r.err, "plait: error:"), 1u) << r.err;
    EXPECT_NE(r.err.find("plait: error: rank 0: no rank made progress for "), std::string::npos) << r.err;
    return r;
  }

  fs::path dir_;
};

}  // namespace plait_train_cli
