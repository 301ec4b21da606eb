// `plait train` through the binary: bad input exits non-zero with one line naming the file and
// the field; a tiny run trains and reports; the memory limit produces the out-of-memory error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using Result = plait::test::CommandResult;

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class TrainCommand : public plait::test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(dir_ / "corpus.txt") << "The quick brown fox jumps over the lazy dog. " << std::string(2000, 'a');
  }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  Result run(const std::string& args) { return plait::test::run_plait(args, "OMP_NUM_THREADS=1"); }

  // A config whose model/train sections can be replaced piece by piece.
  std::string config(const std::string& model, const std::string& train) {
    return "{\"model\": {" + model + "}, \"train\": {" + train + "}, \"data\": {\"paths\": [\"" +
           (dir_ / "corpus.txt").string() + "\"]}}";
  }

  // Runs a bad config and checks: non-zero exit, exactly one line on stderr, naming the file
  // and the field.
  void expect_one_line_error(const std::string& text, const std::string& field) {
    const fs::path file = write("bad.json", text);
    const Result r = run("train --config " + file.string());
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(file.string() + ": " + field), std::string::npos) << r.err;
  }
};

const std::string kModel = R"("layers": 1, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 32)";
const std::string kTrain = R"("steps": 3, "seq": 16, "microbatch_size": 2)";

TEST_F(TrainCommand, BadConfigsExitWithOneLineNamingFileAndField) {
  {
    const Result r = run("train --config " + (dir_ / "missing.json").string());
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.err, "plait: error: " + (dir_ / "missing.json").string() +
                         ": (file): cannot open the file\n");
  }
  expect_one_line_error("{\"model\": {", "(syntax)");
  expect_one_line_error(config(kModel + R"(, "dropout": 0.1)", kTrain), "model.dropout: unknown field");
  expect_one_line_error(config(R"("layers": 1, "hidden": 100, "heads": 3, "vocab": 256, "max_seq": 32)", kTrain),
                        "model.heads: hidden 100 is not divisible by heads 3");
  expect_one_line_error(config(kModel, R"("steps": 3, "seq": 64, "microbatch_size": 2)"),
                        "train.seq: sequence length 64 exceeds model.max_seq 32");
  expect_one_line_error(config(kModel, kTrain + R"(, "learning_rate": 1)"),
                        "train.learning_rate: unknown field");
  // Recomputation beyond a stage's layers (the model has 1).
  std::string recompute = config(kModel, kTrain);
  recompute.insert(recompute.size() - 1, R"(, "parallel": {"recompute": 2})");
  expect_one_line_error(recompute, "parallel.recompute: virtual stage 0 has 1 layer, cannot recompute 2");
  recompute = config(kModel, kTrain);
  recompute.insert(recompute.size() - 1, R"(, "parallel": {"recompute": "most"})");
  expect_one_line_error(recompute, "parallel.recompute: expected \"none\", \"full\"");
  // Sharding where there is no data-parallel group, offload without a host tier.
  auto with_parallel = [&](const std::string& parallel) {
    std::string text = config(kModel, kTrain);
    text.insert(text.size() - 1, ", \"parallel\": " + parallel);
    return text;
  };
  expect_one_line_error(with_parallel(R"({"schedule": "1f1b", "shard": 2})"),
                        "parallel.shard: virtual stage 0 is held by one rank, so there is no data-parallel group");
  expect_one_line_error(with_parallel(R"({"schedule": "1f1b", "offload": true})"),
                        "parallel.offload: virtual stage 0 is offloaded but rank 0 has no host memory tier");
  const Result r = run("train --config " + write("shard.json", with_parallel(R"({"schedule": "1f1b", "shard": 2})")).string());
  EXPECT_EQ(r.status, 1) << r.err;
}

// Packed documents train end to end: byte shards of five documents (files) of 5-40 tokens
// prepared, packed into sequences of 16 with padding, a long one split, with Seq1F1B segments.
TEST_F(TrainCommand, TrainsOnPackedDocuments) {
  const fs::path docs = dir_ / "docs";
  fs::create_directories(docs);
  const char* texts[] = {"first doc.\n", "second, a little longer document.\n", "3\n",
                         "the fourth document is longer than one sequence of sixteen.\n", "five five\n"};
  for (int i = 0; i < 5; ++i) std::ofstream(docs / ("d" + std::to_string(i) + ".txt")) << texts[i];
  const Result prep = run("data prepare --tokenizer byte --val-fraction 0 --quiet --out " + (dir_ / "out").string() +
                          " " + docs.string());
  ASSERT_EQ(prep.status, 0) << prep.err;
  const std::string text = "{\"model\": {" + kModel + "}, \"train\": {" + kTrain +
                           R"(, "segments": [5, 11]}, "data": {"shards": ")" + (dir_ / "out").string() +
                           R"(", "tokenizer": "byte", "packing": "documents"}})";
  const Result r = run("train --config " + write("packed.json", text).string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("done: 3 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("whole documents into"), std::string::npos) << r.out;
}

// The LLaMA family's shape errors: one line naming the file and field, exit 1.
TEST_F(TrainCommand, BadLlamaModelsExitWithOneLineNamingFileAndField) {
  const std::string llama = R"("family": "llama", "layers": 1, "vocab": 256, "max_seq": 32, )";
  auto expect_exit_1 = [&](const std::string& text, const std::string& field) {
    expect_one_line_error(text, field);
    EXPECT_EQ(run("train --config " + (dir_ / "bad.json").string()).status, 1);
  };
  expect_exit_1(config(llama + R"("hidden": 16, "heads": 4, "kv_heads": 3, "ffn_hidden": 32)", kTrain),
                "model.kv_heads: heads 4 is not divisible by kv_heads 3");
  expect_exit_1(config(llama + R"("hidden": 12, "heads": 4, "ffn_hidden": 32)", kTrain),
                "model.heads: rotary positions need an even head dimension");
  expect_exit_1(config(llama + R"("hidden": 16, "heads": 4, "ffn_hidden": 0)", kTrain),
                "model.ffn_hidden: expected an integer in [1, 16777216], found 0");
  expect_exit_1(config(R"("family": "mamba", )" + kModel, kTrain),
                "model.family: expected \"gpt2\" or \"llama\", found \"mamba\"");
  // A field of the other family (every GPT-2 field is also a LLaMA field; the LLaMA-only ones on
  // a GPT-2 model are refused).
  expect_exit_1(config(kModel + R"(, "rope_theta": 500000)", kTrain), "model.rope_theta: a llama field");
  expect_exit_1(config(kModel + R"(, "kv_heads": 1)", kTrain), "model.kv_heads: a llama field");
  // The CPU engine's own limits, before anything is allocated.
  expect_exit_1(config(R"("layers": 1, "hidden": 131072, "heads": 2, "vocab": 256, "max_seq": 32)", kTrain),
                "model.hidden: the CPU engine takes at most 65536, found 131072");
}

TEST_F(TrainCommand, TrainsATinyLlama) {
  const fs::path file = write(
      "llama.json", config(R"("family": "llama", "layers": 2, "hidden": 16, "heads": 4, "kv_heads": 2,
                             "ffn_hidden": 40, "vocab": 256, "max_seq": 32)",
                           kTrain + R"(, "segments": [9, 7])"));
  const Result r = run("train --config " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("model: llama 2 layers, hidden 16, 4 heads (2 kv), ffn 40"), std::string::npos) << r.out;
  EXPECT_EQ(count_of(r.out, "untied"), 1u) << r.out;  // "untied LM head", once
  EXPECT_NE(r.out.find("done: 3 steps"), std::string::npos) << r.out;
}

TEST_F(TrainCommand, TrainsATinyModelAndReportsMemory) {
  const fs::path file = write("ok.json", config(kModel, kTrain + R"(, "segments": [9, 7])"));
  const Result r = run("train --config " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("plait train: config " + file.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done: 3 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kv_cache"), std::string::npos) << r.out;
  // Not a TTY: plain lines, the step counted from 0 as --metrics counts it, then the steps done.
  EXPECT_NE(r.err.find("  step 0 (1/3 done)  loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  step 2 (3/3 done)  loss "), std::string::npos) << r.err;
  // The header prints the global micro-batch count and where it comes from.
  EXPECT_NE(r.out.find("train: 3 steps of 1 micro-batch(es) x 2 sequences of 16 tokens (32 tokens/step; "
                       "train.microbatches 1 per replica x dp 1)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(", LM head tied to the token embedding, max_seq 32: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("sharding:"), std::string::npos) << r.out;  // nothing sharded, no line
  // Three steps: the first and last halves (one step each) are averaged, not the same three
  // steps twice.
  EXPECT_NE(r.out.find("loss (mean of 1 step(s)) "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" at the start (0..0) -> "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" at the end (2..2)"), std::string::npos) << r.out;
}

// In the explicit parallel form train.microbatches is the global count; the header says so.
TEST_F(TrainCommand, TheHeaderSaysTheExplicitFormsMicrobatchesAreGlobal) {
  std::string text = config(kModel, R"("steps": 1, "seq": 16, "microbatch_size": 2, "microbatches": 2)");
  text.insert(text.size() - 1, R"(, "parallel": {"rank_vstages": [[0]], "layers": [1],
                                                 "schedule_text": ["F0.0 BW0.0 F1.0 BW1.0"]})");
  const Result r = run("train --config " + write("explicit.json", text).string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("train: 1 steps of 2 micro-batch(es) x 2 sequences of 16 tokens (64 tokens/step; "
                       "train.microbatches 2, the global count in the explicit parallel form)"),
            std::string::npos)
      << r.out;
}

// A run of one step has one loss to report, not a start and an end.
TEST_F(TrainCommand, AOneStepRunReportsItsLoss) {
  const fs::path file = write("ok.json", config(kModel, R"("steps": 1, "seq": 16, "microbatch_size": 2)"));
  const Result r = run("train --config " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("done: 1 steps (0..0) in "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("at the start"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" tokens/s; loss "), std::string::npos) << r.out;
}

TEST_F(TrainCommand, MemoryLimitGivesTheOutOfMemoryError) {
  const fs::path file = write("ok.json", config(kModel, kTrain));
  const Result r = run("train --config " + file.string() + " --memory-limit 200KiB");
  EXPECT_EQ(r.status, 1);
  // The error says where: the step, the action and the stage whose allocation failed.
  EXPECT_EQ(r.err.rfind("plait: error: step 0, ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(" on stage 0: out of memory: allocating"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("capacity"), std::string::npos) << r.err;
}

}  // namespace
