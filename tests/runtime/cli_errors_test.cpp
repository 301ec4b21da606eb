// Bad input to the plait binary, as a new user types it: each is one line `plait: error: ...`
// naming what is wrong (the flag, file and field, the size), exit status 1, and nothing trained
// or written first. Numbers on plait train's command line are checked by the same rule as plait
// sim and plait plan (cli/flag_values.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using Result = plait::test::CommandResult;

class CliErrors : public plait::test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(dir_ / "corpus.txt") << "The quick brown fox jumps over the lazy dog. " << std::string(2000, 'a');
    std::ofstream(dir_ / "ok.json") << config(kModel);
  }
  static constexpr const char* kModel = R"("layers": 1, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 32)";
  std::string config(const std::string& model, const std::string& train_extra = "", const std::string& more = "") {
    return "{\"model\": {" + model + "}, \"train\": {\"steps\": 2, \"seq\": 16, \"microbatch_size\": 2" + train_extra +
           "}, \"data\": {\"paths\": [\"" + (dir_ / "corpus.txt").string() + "\"]}" + more + "}";
  }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  Result run(const std::string& args) { return plait::test::run_plait(args, "OMP_NUM_THREADS=1"); }
  std::string ok() const { return (dir_ / "ok.json").string(); }

  // Exit status 1, stderr exactly "plait: error: <expected>\n", nothing trained.
  void expect_error(const std::string& args, const std::string& expected) {
    SCOPED_TRACE(args);
    const Result r = run(args);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "plait: error: " + expected + "\n");
    EXPECT_EQ(r.out.find("done:"), std::string::npos) << r.out;
  }
  // As expect_error, for messages checked by their start only.
  void expect_error_starting(const std::string& args, const std::string& start) {
    SCOPED_TRACE(args);
    const Result r = run(args);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err.rfind("plait: error: " + start, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out.find("done:"), std::string::npos) << r.out;
  }
};

TEST_F(CliErrors, TrainFlagNumbersAreCheckedAsSimChecksThem) {
  const std::string c = "train --config " + ok();
  expect_error(c + " --steps 0", "--steps: expected an integer in [1, 1073741824], found '0'");
  expect_error(c + " --steps abc", "--steps: expected an integer in [1, 1073741824], found 'abc'");
  expect_error(c + " --pp 0", "--pp: expected an integer in [1, 65536], found '0'");
  expect_error(c + " --pp 99999999999", "--pp: expected an integer in [1, 65536], found '99999999999'");
  expect_error(c + " --threads 0", "--threads: expected an integer in [1, 4096], found '0'");
  expect_error(c + " --stop-at 0", "--stop-at: expected an integer in [1, 1073741824], found '0'");
  expect_error(c + " --microbatches 0", "--microbatches: expected an integer in [1, 65536], found '0'");
  expect_error(c + " --segments 0", "--segments: expected an integer in [1, 1048576], found '0'");
  expect_error(c + " --trace-step -1", "--trace-step: expected an integer in [0, 1073741824], found '-1'");
  // The same rule as plait sim's.
  expect_error("sim --pp 0", "--pp: expected an integer in [1, 65536], found '0'");
}

TEST_F(CliErrors, OutOfRangeRequestsAreRefusedNotIgnored) {
  const std::string c = "train --config " + ok();
  expect_error(c + " --trace-step 99 --html " + (dir_ / "t.html").string(), "--trace-step 99: this run trains steps 0..1");
  expect_error(c + " --stop-at 5",
               "--stop-at 5: expected a step in [1, 2] (after the start step 0, at most train.steps 2)");
  EXPECT_FALSE(fs::exists(dir_ / "t.html"));
}

TEST_F(CliErrors, OutputDirectoriesAreMadeOrRefusedBeforeTraining) {
  // A missing directory is created, and the run writes into it.
  const fs::path html = dir_ / "out" / "deeper" / "step.html";
  const Result r = run("train --config " + ok() + " --html " + html.string() + " --trace " +
                       (dir_ / "out2" / "step.json").string() + " --metrics " + (dir_ / "out3" / "m.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(html));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "out2" / "step.json"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "out3" / "m.jsonl"));
  // One that cannot be made is an error before any step.
  std::ofstream(dir_ / "afile") << "x";
  expect_error("train --config " + ok() + " --html " + (dir_ / "afile" / "step.html").string(),
               "--html: cannot write " + (dir_ / "afile" / "step.html").string() + ": " + (dir_ / "afile").string() +
                   " is a file, not a directory");
  expect_error("train --config " + ok() + " --trace " + dir_.string(),
               "--trace: " + dir_.string() + " is a directory; expected a file name");
  // plait sim checks before it simulates, too.
  const Result sim = run("sim --pp 2 --microbatches 2 --seq 64 --model gpt-7b --html " + (dir_ / "sim" / "x.html").string());
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "sim" / "x.html"));
}

TEST_F(CliErrors, FilesWhereDirectoriesBelongAndDirectoriesWhereFilesBelong) {
  std::ofstream(dir_ / "afile") << "x";
  expect_error("data prepare --tokenizer byte --quiet --out " + (dir_ / "afile").string() + " " +
                   (dir_ / "corpus.txt").string(),
               "--out: " + (dir_ / "afile").string() + ": is a file; expected a directory for the shards");
  const fs::path cfg = write("ckptfile.json", config(kModel, "", ", \"checkpoint\": {\"dir\": \"" + (dir_ / "afile").string() + "\"}"));
  expect_error("train --config " + cfg.string(),
               cfg.string() + ": checkpoint.dir: " + (dir_ / "afile").string() + " is a file; checkpoints need a directory");
  expect_error("train --config " + dir_.string(), dir_.string() + ": (file): is a directory; expected a JSON file");
}

TEST_F(CliErrors, StrictJsonAndNumbersBeyondADouble) {
  const fs::path dup = write("dup.json", config(kModel, ", \"lr\": 0.001, \"lr\": 0.1"));
  expect_error("train --config " + dup.string(),
               dup.string() + ": train.lr: the key \"lr\" appears twice in one object (reading is strict: which one is meant?)");
  const fs::path huge = write("huge.json", config(kModel, ", \"lr\": 1e400"));
  expect_error("train --config " + huge.string(),
               huge.string() + ": train.lr: 1e400 is beyond the range of a double (about 1.8e308 in magnitude)");
  const fs::path zero = write("zero.json", config(kModel, ", \"stall_timeout_s\": -1"));
  expect_error_starting("train --config " + zero.string(), zero.string() + ": train.stall_timeout_s: expected 0 (no watchdog)");
}

TEST_F(CliErrors, SizesThatDoNotFitAndModelsThatDoNot) {
  expect_error("train --config " + ok() + " --memory-limit 17179869184GiB",
               "--memory-limit: '17179869184GiB': more than 8 EiB (2^63 bytes); expected a size such as 512MiB or 2GiB");
  // In range for every field, and about 80 TiB of parameters: the machine cannot allocate them.
  const fs::path big = write("big.json", config(R"("layers": 1024, "hidden": 65536, "heads": 1024, "vocab": 256, "max_seq": 32)"));
  expect_error_starting("train --config " + big.string(), "out of memory: this machine cannot allocate ");
  const Result r = run("train --config " + big.string());
  EXPECT_NE(r.err.find(" of parameters ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the model or batch needs more memory than the machine has"), std::string::npos) << r.err;
}

TEST_F(CliErrors, UnknownCommandsAreNamed) {
  const Result r = run("bogus");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("plait: error: unknown command 'bogus' for plait; expected one of: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("train"), std::string::npos);
  const Result d = run("data bogus");
  EXPECT_EQ(d.status, 1);
  EXPECT_EQ(d.err.rfind("plait: error: unknown command 'bogus' for plait data; expected one of: prepare", 0), 0u) << d.err;
  EXPECT_EQ(run("--version").status, 0);
}

TEST_F(CliErrors, ASchedulesErrorEchoesOnlyPrintableText) {
  const fs::path sched = write("bad.txt", "F0.0 BW0.0\nF0.0 \xff\xfe\x1b[31m\n");
  const Result r = run("sim --schedule " + sched.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "plait: error: " + sched.string() +
                       ": line 2, column 6: expected an action kind F, B, W or BW (in '\\xff\\xfe\\x1b[31m')\n");
}

// Token shards that cannot rot silently: plait train reads each shard's CRC-32C from the
// manifest plait data prepare wrote beside them, and the tokenizer that wrote them.
TEST_F(CliErrors, ShardsAreVerifiedAsTheyAreRead) {
  const Result prep = run("data prepare --tokenizer byte --quiet --val-fraction 0 --shard-tokens 1000 --out " + (dir_ / "shards").string() +
                          " " + (dir_ / "corpus.txt").string());
  ASSERT_EQ(prep.status, 0) << prep.err;
  EXPECT_NE(prep.out.find("checksums, document indexes and tokenizer: " + (dir_ / "shards" / "corpus.shards.json").string()), std::string::npos)
      << prep.out;
  const auto shards_config = [&](const std::string& tokenizer, const std::string& vocab) {
    return "{\"model\": {\"layers\": 1, \"hidden\": 16, \"heads\": 2, \"vocab\": " + vocab +
           ", \"max_seq\": 32}, \"train\": {\"steps\": 1, \"seq\": 16, \"microbatch_size\": 2}, "
           "\"data\": {\"shards\": \"" + (dir_ / "shards").string() + "\", \"tokenizer\": \"" + tokenizer + "\"}}";
  };
  const fs::path byte_cfg = write("byte.json", shards_config("byte", "256"));
  ASSERT_EQ(run("train --config " + byte_cfg.string()).status, 0);

  // Declared as GPT-2: refused, naming the manifest and what the shards hold.
  const fs::path gpt2_cfg = write("gpt2.json", shards_config("gpt2", "50304"));
  expect_error("train --config " + gpt2_cfg.string(),
               (dir_ / "shards" / "corpus.shards.json").string() +
                   ": tokenizer: the shards hold byte tokens (plait data prepare --tokenizer byte), but " +
                   gpt2_cfg.string() + " (data.tokenizer) declares \"gpt2\"; reading them as gpt2 tokens would train on nonsense");
  // One flipped bit in a shard (still a valid llm.c shard of byte tokens).
  const fs::path shard = dir_ / "shards" / "corpus_train_000001.bin";
  std::string bytes = plait::test::file_bytes(shard.string());
  bytes[1024 + 100] ^= 0x01;
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
  expect_error_starting("train --config " + byte_cfg.string(),
                        shard.string() + ": (checksum): " + (dir_ / "shards" / "corpus.shards.json").string() +
                            " records CRC-32C 0x");
  // Without the manifest (llm.c's own shards have none) they load; declared GPT-2, byte-level
  // shards are still recognised: every token is below 256.
  fs::remove(dir_ / "shards" / "corpus.shards.json");
  ASSERT_EQ(run("train --config " + byte_cfg.string()).status, 0);
  expect_error_starting("train --config " + gpt2_cfg.string(),
                        gpt2_cfg.string() + ": data.tokenizer: \"gpt2\", but every one of the ");
}

}  // namespace
