#include "plait/model/gpt_config.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"

namespace plait::model {
namespace {

GPTConfig parse(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  return parse_gpt_config(JsonFields(j, "cfg.json", "model"));
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GPTConfig, ParsesAndCountsGPT2SmallParameters) {
  const GPTConfig c =
      parse(R"({"layers": 12, "hidden": 768, "heads": 12, "vocab": 50257, "max_seq": 1024})");
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.ffn(), 3072);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.parameter_count(), 124439808);  // GPT-2 small, as published
  GPTConfig untied = c;
  untied.tie_embeddings = false;
  EXPECT_EQ(untied.parameter_count(), 124439808 + 50257 * 768);
}

TEST(GPTConfig, ErrorsNameTheFileAndField) {
  EXPECT_EQ(error_of(R"({"layers": 2, "hidden": 100, "heads": 3, "vocab": 5, "max_seq": 8})"),
            "cfg.json: model.heads: hidden 100 is not divisible by heads 3");
  EXPECT_EQ(error_of(R"({"layers": 2, "hidden": 8, "heads": 2, "vocab": 5, "max_seq": 8, "dropout": 0.1})"),
            "cfg.json: model.dropout: unknown field");
  EXPECT_EQ(error_of(R"({"layers": 2, "hidden": 8, "heads": 2, "vocab": 5})"),
            "cfg.json: model.max_seq: missing; expected an integer");
  EXPECT_EQ(error_of(R"({"layers": 0, "hidden": 8, "heads": 2, "vocab": 5, "max_seq": 8})"),
            "cfg.json: model.layers: expected an integer in [1, 1024], found 0");
}

}  // namespace
}  // namespace plait::model
