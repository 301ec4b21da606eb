#include "plait/model/parameter_layout.h"

#include <gtest/gtest.h>

#include <cmath>

#include "plait/core/memory_tracker.h"
#include "plait/model/stage_model.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;


std::vector<std::string> names(const std::vector<NamedTensor>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(t.name);
  return out;
}

TEST(ParameterLayout, NamesOffsetsAndTiedEmbeddingCopies) {
  const spec::ModelSpec c = tiny_model(spec::Family::gpt2);
  const auto whole = parameter_layout(c, StageSpec::whole_model(c));
  EXPECT_EQ(whole.front().name, "wte");
  EXPECT_EQ(whole[2].name, "h.0.ln_1.weight");
  EXPECT_EQ(whole.back().name, "ln_f.bias");  // tied: the head uses "wte", no lm_head
  for (const auto& t : whole) EXPECT_EQ(t.offset % kTensorAlignment, 0u) << t.name;
  EXPECT_TRUE(find_tensor(whole, "h.1.attn.c_attn.weight").weight_decay);
  EXPECT_FALSE(find_tensor(whole, "h.1.attn.c_attn.bias").weight_decay);
  EXPECT_EQ(find_tensor(whole, "h.1.mlp.c_proj.weight").shape,
            (std::vector<std::int64_t>{16, 64}));

  // The head on its own stage holds its own copy of the tied embedding.
  const auto last = names(parameter_layout(c, {1, 2, false, true}));
  EXPECT_EQ(last.front(), "h.1.ln_1.weight");
  EXPECT_EQ(last.back(), "wte");
  const auto middle = names(parameter_layout(c, {0, 2, false, false}));
  EXPECT_EQ(std::count(middle.begin(), middle.end(), "wte"), 0);

  spec::ModelSpec untied = c;
  untied.tie_embeddings = false;
  EXPECT_EQ(parameter_layout(untied, StageSpec::whole_model(untied)).back().name,
            "lm_head.weight");
  EXPECT_THROW(parameter_layout(c, {1, 3, false, false}), Error);
  EXPECT_THROW(parameter_layout(c, {1, 1, false, false}), Error);
}

TEST(ParameterInit, ValuesDependOnlyOnSeedAndNameWhateverTheStage) {
  spec::ModelSpec c = spec::gpt2_model(2, 64, 4, 37, 24);
  MemoryTracker tracker;
  StageModel whole(c, StageSpec::whole_model(c), tracker), last(c, {1, 2, false, true}, tracker),
      other_seed(c, StageSpec::whole_model(c), tracker);
  whole.init_parameters(5);
  last.init_parameters(5);
  other_seed.init_parameters(6);
  for (const NamedTensor& t : last.tensors()) {
    const auto a = whole.parameter(t.name), b = last.parameter(t.name);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << t.name;
  }
  EXPECT_NE(whole.parameter("wte")[0], other_seed.parameter("wte")[0]);

  auto stddev = [](std::span<const float> v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s / v.size());
  };
  EXPECT_NEAR(stddev(whole.parameter("h.0.mlp.c_fc.weight")), 0.02, 0.001);
  EXPECT_NEAR(stddev(whole.parameter("h.0.mlp.c_proj.weight")), 0.02 / std::sqrt(4.0), 0.0005);
  EXPECT_EQ(whole.parameter("h.1.ln_2.weight")[3], 1.0f);
  EXPECT_EQ(whole.parameter("h.1.attn.c_attn.bias")[3], 0.0f);
}


// LLaMA tensors carry Hugging Face LlamaForCausalLM's names and shapes ((out, in) linear weights),
// with k|v and gate|up back to back so one GEMM computes each pair; a tied LLaMA head shares
// model.embed_tokens.weight.
TEST(ParameterLayout, LlamaUsesHuggingFaceNamesShapesAndPairedProjections) {
  const spec::ModelSpec c = tiny_model(spec::Family::llama);
  const auto whole = parameter_layout(c, StageSpec::whole_model(c));
  EXPECT_EQ(names(whole), (std::vector<std::string>{
                              "model.embed_tokens.weight",
                              "model.layers.0.input_layernorm.weight",
                              "model.layers.0.self_attn.q_proj.weight",
                              "model.layers.0.self_attn.k_proj.weight",
                              "model.layers.0.self_attn.v_proj.weight",
                              "model.layers.0.self_attn.o_proj.weight",
                              "model.layers.0.post_attention_layernorm.weight",
                              "model.layers.0.mlp.gate_proj.weight",
                              "model.layers.0.mlp.up_proj.weight",
                              "model.layers.0.mlp.down_proj.weight",
                              "model.layers.1.input_layernorm.weight",
                              "model.layers.1.self_attn.q_proj.weight",
                              "model.layers.1.self_attn.k_proj.weight",
                              "model.layers.1.self_attn.v_proj.weight",
                              "model.layers.1.self_attn.o_proj.weight",
                              "model.layers.1.post_attention_layernorm.weight",
                              "model.layers.1.mlp.gate_proj.weight",
                              "model.layers.1.mlp.up_proj.weight",
                              "model.layers.1.mlp.down_proj.weight",
                              "model.norm.weight",
                              "lm_head.weight"}));
  const NamedTensor& k = find_tensor(whole, "model.layers.1.self_attn.k_proj.weight");
  const NamedTensor& v = find_tensor(whole, "model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(k.shape, (std::vector<std::int64_t>{8, 16}));  // kv_heads * head_dim = 2 * 4
  EXPECT_EQ(v.offset, k.offset + k.numel);
  const NamedTensor& gate = find_tensor(whole, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(find_tensor(whole, "model.layers.0.mlp.up_proj.weight").offset, gate.offset + gate.numel);
  EXPECT_EQ(find_tensor(whole, "model.layers.0.mlp.down_proj.weight").shape,
            (std::vector<std::int64_t>{16, 24}));
  EXPECT_FALSE(find_tensor(whole, "model.norm.weight").weight_decay);
  std::size_t counted = 0;
  for (const NamedTensor& t : whole) counted += t.numel;
  EXPECT_EQ(static_cast<std::int64_t>(counted), c.parameter_count());
  spec::ModelSpec tied = c;
  tied.tie_embeddings = true;
  EXPECT_EQ(names(parameter_layout(tied, {1, 2, false, true})).back(), "model.embed_tokens.weight");
  EXPECT_EQ(head_tensor_name(tied), "model.embed_tokens.weight");
}

}  // namespace
}  // namespace plait::model
