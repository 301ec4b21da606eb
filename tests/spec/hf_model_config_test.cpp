#include "plait/spec/hf_model_config.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"

namespace plait::spec {
namespace {

using nlohmann::json;

// config.json of a small LLaMA as transformers 4.4x writes it (LlamaConfig.to_json_string).
json llama_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 1, "eos_token_id": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64,
    "initializer_range": 0.02, "intermediate_size": 172, "max_position_embeddings": 256,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
    "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.46.0", "use_cache": true, "vocab_size": 300})");
}

// The Hub's "gpt2" config.json, shrunk.
json gpt2_config() {
  return json::parse(R"({
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 64, "n_embd": 32, "n_head": 4,
    "n_layer": 3, "n_positions": 64, "resid_pdrop": 0.1, "summary_activation": null,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
    "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
    "vocab_size": 300})");
}

std::string error_of(const json& config) {
  try {
    read_hf_model_config(config, "m/config.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfModelConfig, ReadsLlama) {
  const ModelSpec m = read_hf_model_config(llama_config(), "config.json");
  EXPECT_EQ(m.family, Family::llama);
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.hidden, 64);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.ffn_hidden, 172);
  EXPECT_EQ(m.vocab, 300);
  EXPECT_EQ(m.max_seq, 256);
  EXPECT_EQ(m.norm_eps, 1e-6);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_FALSE(m.tie_embeddings);
  json c = llama_config();
  c.erase("num_key_value_heads");  // LlamaConfig: None means multi-head attention
  c.erase("rms_norm_eps");         // LlamaConfig's default 1e-6
  EXPECT_EQ(read_hf_model_config(c, "f").kv_heads, 4);
  EXPECT_EQ(read_hf_model_config(c, "f").norm_eps, 1e-6);
}

TEST(HfModelConfig, ReadsGpt2) {
  const ModelSpec m = read_hf_model_config(gpt2_config(), "config.json");
  EXPECT_EQ(m, gpt2_model(3, 32, 4, 300, 64));
  json c = gpt2_config();
  c["n_inner"] = 100;
  c["tie_word_embeddings"] = false;
  const ModelSpec n = read_hf_model_config(c, "f");
  EXPECT_EQ(n.ffn_hidden, 100);
  EXPECT_FALSE(n.tie_embeddings);
}

TEST(HfModelConfig, WritesWhatItReads) {
  for (const ModelSpec& m : {read_hf_model_config(llama_config(), "f"), read_hf_model_config(gpt2_config(), "f"),
                             gpt2_model(2, 16, 2, 256, 32, false)}) {
    const json written = hf_model_config_json(m, "float32", 50256);
    EXPECT_EQ(read_hf_model_config(written, "f"), m) << written.dump();
    EXPECT_EQ(written.at("architectures")[0], hf_architecture(m.family));
  }
  EXPECT_EQ(hf_model_config_json(gpt2_model(2, 16, 2, 256, 32), "bfloat16").at("torch_dtype"), "bfloat16");
}

TEST(HfModelConfig, RefusesWhatPlaitDoesNotImplementInOneLineNamingTheField) {
  struct Case {
    bool llama;
    const char* field;
    json value;
    const char* says;
  };
  const Case cases[] = {
      {true, "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}, "m/config.json: rope_scaling: "},
      {true, "attention_bias", true, "m/config.json: attention_bias: true: plait's LLaMA attention projections have no biases"},
      {true, "mlp_bias", true, "m/config.json: mlp_bias: true: plait's LLaMA MLP projections have no biases"},
      {true, "head_dim", 32, "m/config.json: head_dim: 32: plait's head dimension is hidden_size / num_attention_heads = 16"},
      {true, "hidden_act", "gelu", "m/config.json: hidden_act: \"gelu\": plait's LLaMA MLP is SwiGLU"},
      {true, "sliding_window", 4096, "m/config.json: sliding_window: a field plait does not know in a llama config"},
      {true, "architectures", {"LlamaForSequenceClassification"}, "m/config.json: architectures: \"LlamaForSequenceClassification\": plait reads LlamaForCausalLM"},
      {true, "num_key_value_heads", 3, "m/config.json: num_key_value_heads: num_attention_heads 4 is not divisible by 3"},
      {false, "scale_attn_by_inverse_layer_idx", true, "m/config.json: scale_attn_by_inverse_layer_idx: true: plait does not scale attention by the layer index"},
      {false, "reorder_and_upcast_attn", true, "m/config.json: reorder_and_upcast_attn: true: "},
      {false, "scale_attn_weights", false, "m/config.json: scale_attn_weights: false: "},
      {false, "activation_function", "gelu", "m/config.json: activation_function: \"gelu\": plait's GPT-2 MLP uses the tanh form of GELU"},
      {false, "add_cross_attention", true, "m/config.json: add_cross_attention: true: "},
      {false, "n_embd", 0, "m/config.json: n_embd: expected a positive integer, found 0"},
      {false, "model_type", "gpt_neox", "m/config.json: model_type: \"gpt_neox\": plait implements \"llama\""},
  };
  for (const Case& c : cases) {
    json config = c.llama ? llama_config() : gpt2_config();
    config[c.field] = c.value;
    const std::string e = error_of(config);
    EXPECT_EQ(e.rfind(c.says, 0), 0u) << c.field << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  json missing = llama_config();
  missing.erase("hidden_size");
  EXPECT_EQ(error_of(missing).rfind("m/config.json: hidden_size: missing", 0), 0u) << error_of(missing);
  // Neutral values of refused fields are fine.
  json neutral = gpt2_config();
  neutral["scale_attn_by_inverse_layer_idx"] = false;
  neutral["reorder_and_upcast_attn"] = false;
  neutral["activation_function"] = "gelu_pytorch_tanh";
  EXPECT_EQ(error_of(neutral), "(no error)");
}

}  // namespace
}  // namespace plait::spec
