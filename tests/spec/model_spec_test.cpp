// The model description's formulas against published parameter counts and hand-computed terms,
// and its JSON reader's errors.
#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/spec/model_presets.h"
#include "plait/spec/model_spec_json.h"

namespace plait::spec {
namespace {

const ModelSpec& preset(const std::string& name) {
  const NamedModel* p = find_model_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return p->model;
}

// Hugging Face's parameter counts: GPT-2 small 124,439,808 (with its 1024-row position table);
// LLaMA-7B 6,738,415,616; TinyLlama-1.1B 1,100,048,384; Llama-3-8B 8,030,261,248; LLaMA-13B
// 13,015,864,320.
TEST(ModelSpec, ParameterCountsMatchThePublishedModels) {
  EXPECT_EQ(preset("gpt2-small").parameter_count(), 124439808);
  EXPECT_EQ(preset("gpt2-small").layer_parameters(), 12 * 768 * 768 + 13 * 768);
  EXPECT_EQ(preset("llama-7b").parameter_count(), 6738415616);
  EXPECT_EQ(preset("llama-7b").layer_parameters(), 202383360);  // Zorse's model_stats.json
  EXPECT_EQ(preset("tinyllama-1.1b").parameter_count(), 1100048384);
  EXPECT_EQ(preset("llama-3-8b").parameter_count(), 8030261248);
  EXPECT_EQ(preset("llama-13b").parameter_count(), 13015864320);
}

// A stage's parameters: the embedding on the first, the final norm and head on the last; a tied
// head on a stage without the embedding keeps its own copy of the table.
TEST(ModelSpec, StageParametersAddUpAndCountTheTiedCopy) {
  const ModelSpec gpt = gpt2_model(4, 64, 4, 100, 32);
  EXPECT_EQ(gpt.stage_parameters(4, true, true),
            gpt.embedding_parameters() + 4 * gpt.layer_parameters() + 2 * 64);
  EXPECT_EQ(gpt.stage_parameters(2, false, true), 2 * gpt.layer_parameters() + 2 * 64 + 100 * 64);
  EXPECT_EQ(gpt.embedding_parameters(), (100 + 32) * 64);
  const ModelSpec& llama = preset("llama-7b");
  EXPECT_EQ(llama.embedding_parameters(), 32000 * 4096);  // no position table
  EXPECT_EQ(llama.head_parameters(true), 4096 + 32000 * 4096);  // untied
}

// FLOPs by hand for a tiny LLaMA: L=1, C=8, 4 heads of 2 (2 kv heads: K = 4), F=12, V=10,
// segment [2, 5): linear 2*3*8*(16 + 8) + 2*3*8*12*3 = 1152 + 1728; attention (4*2+3)*4*(3*5 -
// 4.5) = 462; vocab 4*3*8*10 = 960.
TEST(ModelSpec, LlamaFlopsCountGroupedKeysAndThreeMlpMatrices) {
  ModelSpec m;
  m.family = Family::llama;
  m.layers = 1;
  m.hidden = 8;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 12;
  m.vocab = 10;
  m.max_seq = 16;
  EXPECT_DOUBLE_EQ(m.layer_linear_flops(3), 1152 + 1728);
  EXPECT_DOUBLE_EQ(m.layer_attention_flops(2, 3), 462);
  EXPECT_DOUBLE_EQ(m.segment_forward_flops(2, 3), 1152 + 1728 + 462 + 960);
  // The GPT-2 reference's form when K = C and F = 4C: 8sC^2 + 4sCF.
  const ModelSpec g = gpt2_model(1, 8, 4, 10, 16);
  EXPECT_DOUBLE_EQ(g.layer_linear_flops(3), 8.0 * 3 * 64 + 4.0 * 3 * 8 * 32);
}

std::string error_of(const std::string& model) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"model": )" + model + "}");
  try {
    read_model_spec(JsonFields(doc, "m.json").object("model"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelSpecJson, ReadsBothFamiliesWithTheirDefaultsAndRoundTrips) {
  const nlohmann::json doc = nlohmann::json::parse(
      R"({"model": {"family": "llama", "layers": 2, "hidden": 16, "heads": 4, "kv_heads": 2,
          "ffn_hidden": 40, "vocab": 32, "max_seq": 64}})");
  const ModelSpec m = read_model_spec(JsonFields(doc, "m.json").object("model"));
  EXPECT_EQ(m.family, Family::llama);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_FALSE(m.tie_embeddings);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  const nlohmann::json back = {{"model", model_spec_json(m)}};
  EXPECT_EQ(read_model_spec(JsonFields(back, "b.json").object("model")), m);
  const nlohmann::json gdoc = nlohmann::json::parse(
      R"({"model": {"layers": 2, "hidden": 16, "heads": 4, "vocab": 32, "max_seq": 64}})");
  const ModelSpec g = read_model_spec(JsonFields(gdoc, "g.json").object("model"));
  EXPECT_EQ(g, gpt2_model(2, 16, 4, 32, 64));
  const nlohmann::json gback = {{"model", model_spec_json(g)}};
  EXPECT_EQ(read_model_spec(JsonFields(gback, "b.json").object("model")), g);
}

TEST(ModelSpecJson, BadShapesNameTheFileAndField) {
  const std::string llama = R"("family": "llama", "layers": 2, "vocab": 32, "max_seq": 64, )";
  EXPECT_EQ(error_of("{" + llama + R"("hidden": 16, "heads": 4, "kv_heads": 3, "ffn_hidden": 8})"),
            "m.json: model.kv_heads: heads 4 is not divisible by kv_heads 3");
  EXPECT_EQ(error_of("{" + llama + R"("hidden": 12, "heads": 4, "ffn_hidden": 8})"),
            "m.json: model.heads: rotary positions need an even head dimension; hidden 12 / heads 4 = 3");
  EXPECT_EQ(error_of("{" + llama + R"("hidden": 16, "heads": 4, "ffn_hidden": 0})"),
            "m.json: model.ffn_hidden: expected an integer in [1, 16777216], found 0");
  EXPECT_EQ(error_of("{" + llama + R"("hidden": 16, "heads": 4})"),
            "m.json: model.ffn_hidden: missing; expected an integer");
  EXPECT_EQ(error_of(R"({"family": "bert", "layers": 1})"),
            "m.json: model.family: expected \"gpt2\" or \"llama\", found \"bert\"");
  EXPECT_EQ(error_of(R"({"layers": 2, "hidden": 16, "heads": 4, "vocab": 32, "max_seq": 64, "kv_heads": 2})"),
            "m.json: model.kv_heads: a llama field; gpt2 models have multi-head attention and "
            "learned positions (set \"family\": \"llama\" to use it)");
  EXPECT_EQ(error_of(R"({"layers": 2, "hidden": 16, "heads": 4, "vocab": 32, "max_seq": 64, "hiden": 2})"),
            "m.json: model.hiden: unknown field");
}

TEST(ModelPresets, ResolveSizesPresetsToTheSequenceAndKnowTheirTables) {
  const NamedModel tiny = resolve_model("tinyllama-1.1b", 4096);
  EXPECT_EQ(tiny.model.max_seq, 4096);
  EXPECT_EQ(tiny.profile_model, "deepspeedllama_tiny");
  EXPECT_EQ(resolve_model("llama-7b", 512).profile_model, "deepspeedllama_7b");
  EXPECT_TRUE(resolve_model("llama-3-8b", 512).profile_model.empty());
  EXPECT_THROW(resolve_model("llama-70b", 512), Error);
  for (const NamedModel& p : model_presets()) {
    EXPECT_NO_THROW(check_model_spec(p.model, p.name)) << p.name;
    EXPECT_NE(model_preset_lines().find(p.name), std::string::npos);
  }
}

}  // namespace
}  // namespace plait::spec
