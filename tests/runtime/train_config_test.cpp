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
  EXPECT_EQ(c.partition().lengths, (std::vector<std::int64_t>{22, 21, 21}));
  EXPECT_EQ(c.train.tokens_per_step(), 128);
  EXPECT_EQ(c.data.paths, (std::vector<std::string>{"/usr/share/games/fortunes"}));
  const RunConfig d = parse_run_config(
      nlohmann::json::parse(std::string("{") + kModel +
                            R"(, "train": {"steps": 10, "seq": 8, "microbatch_size": 2, "segments": [5, 3]},
                               "data": {"paths": ["a.txt"]}})"),
      "cfg.json");
  EXPECT_EQ(d.partition().starts.back(), 5);
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

TEST(TrainConfig, DataShardsCheckpointsValidationAndNonFiniteSteps) {
  const RunConfig c = parse_run_config(nlohmann::json::parse(R"({
      "model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 50304, "max_seq": 64},
      "train": {"steps": 10, "seq": 64, "microbatch_size": 2, "eval_every": 5, "eval_batches": 3,
                "on_nonfinite": "skip"},
      "data": {"shards": "data/fineweb", "tokenizer": "gpt2", "packing": "documents"},
      "checkpoint": {"dir": "ckpt", "every": 5, "keep_last": 2}})"),
                                       "cfg.json");
  EXPECT_TRUE(c.data.uses_shards());
  EXPECT_TRUE(c.data.packs_documents());
  EXPECT_EQ(c.data.vocab_size(), 50257);
  EXPECT_TRUE(c.data.paths.empty());
  EXPECT_EQ(c.train.eval_every, 5);
  EXPECT_EQ(c.train.eval_batches, 3);
  EXPECT_EQ(c.train.on_nonfinite, TrainConfig::OnNonFinite::kSkip);
  ASSERT_TRUE(c.checkpoint);
  EXPECT_EQ(c.checkpoint->dir, "ckpt");
  EXPECT_EQ(c.checkpoint->every, 5);
  EXPECT_EQ(c.checkpoint->keep_last, 2);
  // The JSON form reads back to the same config.
  EXPECT_EQ(to_json(parse_run_config(to_json(c), "again.json")), to_json(c));
  EXPECT_EQ(to_json(c)["data"]["packing"], "documents");
  const RunConfig d = parse_run_config(nlohmann::json::parse(std::string("{") + kModel +
      R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1}})"), "cfg.json");
  EXPECT_FALSE(d.checkpoint);
  EXPECT_EQ(d.train.on_nonfinite, TrainConfig::OnNonFinite::kAbort);
  EXPECT_EQ(d.train.eval_every, 0);
}

// What data parallelism reduces: fp32 by default, bf16 only under bf16 precision (one line
// naming the field otherwise); the JSON form carries it.
TEST(TrainConfig, GradReduceIsFp32ByDefaultAndBf16OnlyWithBf16Precision) {
  const std::string m = std::string("{") + kModel;
  const RunConfig d = parse_run_config(nlohmann::json::parse(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1}})"), "cfg.json");
  EXPECT_EQ(d.train.grad_reduce, spec::GradReduce::fp32);
  const RunConfig b = parse_run_config(
      nlohmann::json::parse(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "precision": "bf16",
                                               "grad_reduce": "bf16"}})"),
      "cfg.json");
  EXPECT_EQ(b.train.grad_reduce, spec::GradReduce::bf16);
  EXPECT_EQ(to_json(b)["train"]["grad_reduce"], "bf16");
  EXPECT_EQ(parse_run_config(to_json(b), "again.json").train.grad_reduce, spec::GradReduce::bf16);
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "grad_reduce": "bf16"}})"),
            "cfg.json: train.grad_reduce: \"bf16\" rounds gradients for the wire, which needs train.precision "
            "\"bf16\" (found \"fp32\"); use \"fp32\"");
  EXPECT_EQ(error_of(m + R"(, "train": {"steps": 1, "seq": 8, "microbatch_size": 1, "precision": "bf16",
                                        "grad_reduce": "fp16"}})"),
            "cfg.json: train.grad_reduce: expected \"fp32\" or \"bf16\", found \"fp16\"");
}

TEST(TrainConfig, DataAndCheckpointErrorsNameTheFieldAndTheExpectedValue) {
  const std::string m = std::string("{") + kModel + R"(, "train": {"steps": 4, "seq": 8, "microbatch_size": 1})";
  EXPECT_EQ(error_of(m + R"(, "data": {"shards": "d", "tokenizer": "gpt2"}})"),
            "cfg.json: model.vocab: the GPT-2 tokenizer (data.tokenizer) needs vocab >= 50257, found 256");
  EXPECT_EQ(error_of(m + R"(, "data": {"shards": "d"}})"),
            "cfg.json: data.tokenizer: required with shards: \"byte\" or \"gpt2\", the tokenizer the "
            "shards were prepared with");
  EXPECT_EQ(error_of(m + R"(, "data": {"shards": "d", "tokenizer": "bpe"}})"),
            "cfg.json: data.tokenizer: expected \"byte\" or \"gpt2\", found \"bpe\"");
  EXPECT_EQ(error_of(m + R"(, "data": {"shards": "d", "paths": ["a"], "tokenizer": "byte"}})"),
            "cfg.json: data.shards: give either text files (paths) or token shards (shards), not both");
  EXPECT_EQ(error_of(m + R"(, "data": {"paths": ["a"], "tokenizer": "gpt2"}})").substr(0, 56),
            "cfg.json: data.tokenizer: text paths are tokenized byte ");
  EXPECT_EQ(error_of(m + R"(, "data": {"shards": "d", "tokenizer": "byte", "val_paths": ["v"]}})").substr(0, 43),
            "cfg.json: data.val_paths: applies to text p");
  EXPECT_EQ(error_of(m + R"(, "data": {"shards": "d", "tokenizer": "byte", "packing": "docs"}})"),
            "cfg.json: data.packing: expected \"stream\" or \"documents\", found \"docs\"");
  EXPECT_EQ(error_of(m + R"(, "data": {"paths": ["a"], "packing": "documents"}})"),
            "cfg.json: data.packing: \"documents\" packs the documents of token shards (plait data prepare records "
            "them); give data.shards, or use \"stream\"");
  EXPECT_EQ(error_of(std::string("{") + kModel +
                     R"(, "train": {"steps": 4, "seq": 8, "microbatch_size": 1, "eval_every": 2}})"),
            "cfg.json: train.eval_every: validation needs held-out data: data.val_paths (text) or "
            "data.shards (its *_val_* shards)");
  EXPECT_EQ(error_of(std::string("{") + kModel +
                     R"(, "train": {"steps": 4, "seq": 8, "microbatch_size": 1, "on_nonfinite": "ignore"}})"),
            "cfg.json: train.on_nonfinite: expected \"abort\" or \"skip\", found \"ignore\"");
  EXPECT_EQ(error_of(m + R"(, "checkpoint": {"every": 2}})"),
            "cfg.json: checkpoint.dir: missing; expected a string");
  EXPECT_EQ(error_of(m + R"(, "checkpoint": {"dir": "c", "every": -1}})").substr(0, 31),
            "cfg.json: checkpoint.every: exp");
  EXPECT_EQ(error_of(m + R"(, "checkpoint": {"dir": "c", "keep": 2}})"),
            "cfg.json: checkpoint.keep: unknown field");
}

TEST(TrainConfig, StragglersSectionDefaultsRoundTripAndErrors) {
  const std::string m = std::string("{") + kModel + R"(, "train": {"steps": 4, "seq": 8, "microbatch_size": 1})";
  EXPECT_FALSE(parse_run_config(nlohmann::json::parse(m + "}"), "cfg.json").stragglers);
  const RunConfig c = parse_run_config(nlohmann::json::parse(m + R"(, "stragglers": {"threshold": 2, "consecutive": 2}})"), "cfg.json");
  ASSERT_TRUE(c.stragglers);
  EXPECT_DOUBLE_EQ(c.stragglers->threshold, 2);
  EXPECT_DOUBLE_EQ(c.stragglers->clear_below, 1.5);  // half-way back, as the default
  EXPECT_EQ(c.stragglers->consecutive, 2);
  EXPECT_EQ(c.stragglers->window, StragglerConfig{}.window);
  const RunConfig back = parse_run_config(to_json(c), "again.json");
  EXPECT_DOUBLE_EQ(back.stragglers->clear_below, 1.5);
  EXPECT_EQ(back.stragglers->cooldown, c.stragglers->cooldown);
  EXPECT_TRUE(back.stragglers->rebalance);  // tier (a) on by default
  const RunConfig off = parse_run_config(nlohmann::json::parse(m + R"(, "stragglers": {"rebalance": false}})"), "cfg.json");
  EXPECT_FALSE(parse_run_config(to_json(off), "again.json").stragglers->rebalance);
  EXPECT_EQ(error_of(m + R"(, "stragglers": {"threshold": 0.8}})"),
            "cfg.json: stragglers.threshold: expected a slowdown factor above 1 (e.g. 1.5)");
  EXPECT_EQ(error_of(m + R"(, "stragglers": {"threshold": 1.5, "clear_below": 2}})"),
            "cfg.json: stragglers.clear_below: expected a factor in [1, threshold] (1.500000)");
  EXPECT_EQ(error_of(m + R"(, "stragglers": {"window": 0}})").substr(0, 35), "cfg.json: stragglers.window: expect");
  EXPECT_EQ(error_of(m + R"(, "stragglers": {"k": 3}})"), "cfg.json: stragglers.k: unknown field");
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
