// `plait generate` and train.sample_every through the binary: a checkpoint continues a prompt
// and reports the speed with and without the K/V cache (the same tokens both ways); the export
// of it generates the same text; a run that samples prints its samples and trains exactly as
// one that does not; bad flags are one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using plait::test::CommandResult;

class GenerateCli : public plait::test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(dir_ / "corpus.txt") << "the cat sat on the mat. " << std::string(500, 'x') << " the end.";
  }
  CommandResult run(const std::string& args) { return plait::test::run_plait(args, "OMP_NUM_THREADS=1"); }
  std::string config(const std::string& train_extra, const std::string& checkpoint) {
    const fs::path file = dir_ / "run.json";
    std::ofstream(file) << R"({"model": {"layers": 2, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 48},
        "train": {"steps": 4, "seq": 16, "microbatch_size": 2)" + train_extra + R"(},
        "data": {"paths": [")" + (dir_ / "corpus.txt").string() + R"("]})" + checkpoint + "}";
    return file.string();
  }
  std::string between(const std::string& text, const std::string& from, const std::string& to) {
    const std::size_t a = text.find(from);
    if (a == std::string::npos) return "";
    const std::size_t b = text.find(to, a + from.size());
    return text.substr(a + from.size(), b == std::string::npos ? std::string::npos : b - a - from.size());
  }
};

TEST_F(GenerateCli, ContinuesAPromptWithAndWithoutTheCache) {
  const std::string ckpt = (dir_ / "ckpt").string();
  ASSERT_EQ(run("train --config " + config("", R"(, "checkpoint": {"dir": ")" + ckpt + R"("})")).status, 0);
  const CommandResult g = run("generate --checkpoint " + ckpt + " --prompt 'the ' --tokens 30 --temperature 0");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_NE(g.out.find("greedy (temperature 0)"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("---\nthe "), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("with the K/V cache: prompt of 4 tokens"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("then 30 new tokens"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("without the cache (a forward of the whole sequence per token): 30 new tokens"), std::string::npos);
  EXPECT_NE(g.out.find("the same tokens"), std::string::npos) << g.out;
  // The Hugging Face export of the checkpoint generates the same text (its byte tokenizer.json
  // recognised).
  ASSERT_EQ(run("export hf --checkpoint " + ckpt + " --out " + (dir_ / "hf").string()).status, 0);
  const CommandResult h = run("generate --hf " + (dir_ / "hf").string() + " --prompt 'the ' --tokens 30 --temperature 0 --cache-only");
  ASSERT_EQ(h.status, 0) << h.err;
  EXPECT_EQ(between(h.out, "---\n", "\n---"), between(g.out, "---\n", "\n---"));
  EXPECT_EQ(h.out.find("without the cache"), std::string::npos);
  // Sampling with a seed is reproducible.
  const std::string sample = "generate --checkpoint " + ckpt + " --prompt 'the ' --tokens 20 --top-k 5 --top-p 0.9 --seed 3 --cache-only";
  EXPECT_EQ(between(run(sample).out, "---\n", "\n---"), between(run(sample).out, "---\n", "\n---"));
  // One line: too many tokens for max_seq, a bad number, neither source.
  for (const auto& [args, says] :
       {std::pair<std::string, std::string>{"--checkpoint " + ckpt + " --prompt 'the ' --tokens 45",
                                            "--tokens: (length): a prompt of 4 tokens and 45 new ones exceed the model's max_seq 48"},
        {"--checkpoint " + ckpt + " --prompt x --temperature hot", "--temperature: expected a number in [0, 1e+06], found 'hot'"},
        {"--prompt x", "give one of --checkpoint DIR and --hf DIR"}}) {
    const CommandResult e = run("generate " + args);
    EXPECT_EQ(e.status, 1) << args;
    EXPECT_EQ(e.err, "plait: error: " + says + "\n") << args;
  }
}

TEST_F(GenerateCli, SamplesWhileTrainingChangeNoStep) {
  const CommandResult a = run("train --config " + config(R"(, "sample_every": 2, "sample_tokens": 12)", "") + " --metrics " +
                              (dir_ / "a.jsonl").string());
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.err.find("step 1: sample (12 tokens, train.sample_every):"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("step 3: sample (12 tokens, train.sample_every):"), std::string::npos) << a.err;
  const CommandResult b = run("train --config " + config("", "") + " --metrics " + (dir_ / "b.jsonl").string());
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(b.err.find("sample ("), std::string::npos);
  const std::string ma = bytes_of((dir_ / "a.jsonl").string()), mb = bytes_of((dir_ / "b.jsonl").string());
  ASSERT_FALSE(ma.empty());
  // Metrics lines carry the step's wall time, which differs run to run: compare the losses,
  // norms and rates, which are printed in round-trip precision.
  const auto numbers = [](const std::string& m) {
    std::string out;
    for (std::size_t at = 0; (at = m.find("\"loss\":", at)) != std::string::npos; ++at) out += m.substr(at, m.find(',', at) - at) + ";";
    for (std::size_t at = 0; (at = m.find("\"grad_norm\":", at)) != std::string::npos; ++at) out += m.substr(at, m.find(',', at) - at) + ";";
    return out;
  };
  EXPECT_EQ(numbers(ma), numbers(mb));
  EXPECT_NE(numbers(ma).find("loss"), std::string::npos);
}

}  // namespace
