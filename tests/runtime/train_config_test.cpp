#include "plait/runtime/train_config.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"

namespace plait::runtime {
namespace {

const char* kModel = R"("model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 64})";

std::string error_of(const std::string& text) {
  try {
    parse_run_config(nlohmann::json::parse(text), "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainConfig, ParsesWithDefaultsAndSegments) {
  const RunConfig c = parse_run_config(
      nlohmann::json::parse(std::string("{") + kModel +
                            R"(, "train": {"steps": 10, "seq": 64, "microbatch_size": 2, "segments": 3}})"),
      "cfg.json");
  EXPECT_EQ(c.train.microbatches, 1);
  EXPECT_DOUBLE_EQ(c.train.min_lr, c.train.lr / 10);
  EXPECT_EQ(c.train.segment_lengths, (std::vector<int>{22, 21, 21}));
  EXPECT_EQ(c.train.tokens_per_step(), 128);
  EXPECT_EQ(c.data.paths, (std::vector<std::string>{"/usr/share/games/fortunes"}));
  const RunConfig d = parse_run_config(
      nlohmann::json::parse(std::string("{") + kModel +
                            R"(, "train": {"steps": 10, "seq": 8, "microbatch_size": 2, "segments": [5, 3]},
                               "data": {"paths": ["a.txt"]}})"),
      "cfg.json");
  EXPECT_EQ(d.train.segments().back().start, 5);
  EXPECT_EQ(d.data.paths, (std::vector<std::string>{"a.txt"}));
}

TEST(TrainConfig, ErrorsNameTheFileAndField) {
  const std::string m = std::string("{") + kModel;
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 65, "microbatch_size": 1}})"),
            "cfg.json: train.seq: sequence length 65 exceeds model.max_seq 64");
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "lr": 0}})"),
            "cfg.json: train.lr: expected a learning rate > 0, found 0.000000");
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "segments": [4, 3]}})"),
            "cfg.json: train.segments: segment lengths sum to 7, expected train.seq 8");
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "sed": 1}})"),
            "cfg.json: train.sed: unknown field");
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1}, "parallel": {}})"),
            "cfg.json: parallel: unknown field");
  EXPECT_EQ(error_of(R"({"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 100, "max_seq": 64},
                        "train": {"steps": 1, "seq": 8, "microbatch_size": 1}})"),
            "cfg.json: model.vocab: the byte-level tokenizer needs vocab >= 256, found 100");
  EXPECT_EQ(error_of(m + "}"), "cfg.json: train: missing; expected an object");
}

TEST(TrainConfig, TheShippedDefaultFileIsTheBuiltInDefault) {
  const RunConfig file = load_run_config(PLAIT_SOURCE_DIR "/configs/default.json");
  EXPECT_EQ(to_json(file), to_json(default_run_config()));
  // And every shipped example parses.
  EXPECT_NO_THROW(load_run_config(PLAIT_SOURCE_DIR "/configs/gpt2-small.json"));
  EXPECT_NO_THROW(load_run_config(PLAIT_SOURCE_DIR "/configs/seq1f1b-segments.json"));
}

}  // namespace
}  // namespace plait::runtime
