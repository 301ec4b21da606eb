#include "plait/spec/hf_model_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"

namespace plait::spec {
namespace {

using nlohmann::json;

// Fields of transformers' PretrainedConfig that every config.json may carry and that do not
// change what the weights compute: bookkeeping, token ids, task heads' labels, generation
// defaults (older versions wrote them all into config.json).
const std::set<std::string>& common_ignored_fields() {
  static const std::set<std::string> fields = {
      "_name_or_path", "_commit_hash", "transformers_version", "torch_dtype", "dtype", "use_bfloat16",
      "architectures", "model_type", "return_dict", "output_hidden_states", "output_attentions",
      "torchscript", "tf_legacy_loss", "pruned_heads", "tie_encoder_decoder", "is_decoder",
      "cross_attention_hidden_size", "chunk_size_feed_forward", "finetuning_task", "id2label",
      "label2id", "num_labels", "tokenizer_class", "prefix", "bos_token_id", "pad_token_id",
      "eos_token_id", "sep_token_id", "decoder_start_token_id", "task_specific_params",
      "problem_type", "use_cache", "initializer_range", "max_length", "min_length", "do_sample",
      "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k",
      "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
      "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
      "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
      "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
      "begin_suppress_tokens", "_attn_implementation", "_attn_implementation_autoset",
      "attn_implementation"};
  return fields;
}

class HfFields {
 public:
  HfFields(const json& config, const std::string& file) : config_(config), file_(file) {
    if (!config.is_object()) throw InputError(file, "(top level)", "expected a JSON object (a model's config.json)");
  }
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(file_, field, problem);
  }
  // Present and not null.
  bool given(const std::string& key) {
    read_.insert(key);
    auto it = config_.find(key);
    return it != config_.end() && !it->is_null();
  }
  int positive(const std::string& key) {
    if (!given(key)) fail(key, "missing; expected a positive integer (transformers writes it)");
    const json& v = config_.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (std::int64_t{1} << 30)) {
      fail(key, "expected a positive integer, found " + v.dump());
    }
    return static_cast<int>(v.get<std::int64_t>());
  }
  int positive(const std::string& key, int fallback) { return given(key) ? positive(key) : fallback; }
  double number(const std::string& key, double fallback) {
    if (!given(key)) return fallback;
    const json& v = config_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      fail(key, "expected a positive number, found " + v.dump());
    }
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool fallback) {
    if (!given(key)) return fallback;
    const json& v = config_.at(key);
    if (!v.is_boolean()) fail(key, "expected true or false, found " + v.dump());
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) {
    if (!given(key)) return fallback;
    const json& v = config_.at(key);
    if (!v.is_string()) fail(key, "expected a string, found " + v.dump());
    return v.get<std::string>();
  }
  // A field plait does not implement unless it has its neutral value (absent or null count as
  // neutral): one line naming it.
  void refuse_unless(const std::string& key, const json& neutral, const std::string& what) {
    if (!given(key)) return;
    if (config_.at(key) != neutral) fail(key, config_.at(key).dump() + ": " + what);
  }
  // Marks fields whose values do not change the function (dropout: plait trains without it).
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* k : keys) read_.insert(k);
  }
  void check_no_unknown_fields(const std::string& family) const {
    for (auto it = config_.begin(); it != config_.end(); ++it) {
      if (!read_.contains(it.key()) && !common_ignored_fields().contains(it.key())) {
        fail(it.key(), "a field plait does not know in a " + family +
                           " config; refusing rather than guessing what it changes in the model");
      }
    }
  }
  const json& raw() const { return config_; }

 private:
  const json& config_;
  std::string file_;
  std::set<std::string> read_;
};

void check_architectures(HfFields& f, std::initializer_list<const char*> accepted) {
  if (!f.given("architectures")) return;
  const json& a = f.raw().at("architectures");
  if (!a.is_array()) f.fail("architectures", "expected an array of class names, found " + a.dump());
  for (const json& name : a) {
    if (!name.is_string()) f.fail("architectures", "expected class names, found " + a.dump());
    if (std::none_of(accepted.begin(), accepted.end(), [&](const char* c) { return name.get<std::string>() == c; })) {
      std::string list;
      for (const char* c : accepted) list += std::string(list.empty() ? "" : " or ") + c;
      f.fail("architectures", name.dump() + ": plait reads " + list + " (a causal language model)");
    }
  }
}

ModelSpec read_llama(HfFields& f) {
  check_architectures(f, {"LlamaForCausalLM"});
  ModelSpec m;
  m.family = Family::llama;
  m.hidden = f.positive("hidden_size");
  m.ffn_hidden = f.positive("intermediate_size");
  m.layers = f.positive("num_hidden_layers");
  m.heads = f.positive("num_attention_heads");
  m.kv_heads = f.positive("num_key_value_heads", m.heads);  // LlamaConfig: None -> heads
  m.vocab = f.positive("vocab_size");
  m.max_seq = f.positive("max_position_embeddings");
  m.norm_eps = f.number("rms_norm_eps", 1e-6);
  m.rope_theta = f.number("rope_theta", 10000.0);
  m.tie_embeddings = f.boolean("tie_word_embeddings", false);
  if (m.hidden % m.heads != 0) {
    f.fail("num_attention_heads", "hidden_size " + std::to_string(m.hidden) + " is not divisible by " +
                                      std::to_string(m.heads) + " heads");
  }
  if (m.heads % m.kv_heads != 0) {
    f.fail("num_key_value_heads", "num_attention_heads " + std::to_string(m.heads) + " is not divisible by " +
                                      std::to_string(m.kv_heads));
  }
  if (f.given("head_dim")) {
    const json& d = f.raw().at("head_dim");
    if (d != json(m.hidden / m.heads)) {
      f.fail("head_dim", d.dump() + ": plait's head dimension is hidden_size / num_attention_heads = " +
                             std::to_string(m.hidden / m.heads) + " (query and output projections of other widths are not implemented)");
    }
  }
  if (f.string("hidden_act", "silu") != "silu") {
    f.fail("hidden_act", "\"" + f.string("hidden_act", "") + "\": plait's LLaMA MLP is SwiGLU (\"silu\")");
  }
  f.refuse_unless("rope_scaling", nullptr, "plait implements plain rotary positions (no rope_scaling)");
  f.refuse_unless("attention_bias", false, "plait's LLaMA attention projections have no biases");
  f.refuse_unless("mlp_bias", false, "plait's LLaMA MLP projections have no biases");
  // pretraining_tp > 1 only slices the same products in transformers; dropout is not applied
  // at inference and plait trains without it.
  if (f.given("pretraining_tp")) f.positive("pretraining_tp");
  f.ignore({"attention_dropout"});
  f.check_no_unknown_fields("llama");
  return m;
}

ModelSpec read_gpt2(HfFields& f) {
  check_architectures(f, {"GPT2LMHeadModel", "GPT2Model"});
  ModelSpec m;
  m.family = Family::gpt2;
  m.hidden = f.positive("n_embd");
  m.layers = f.positive("n_layer");
  m.heads = f.positive("n_head");
  m.kv_heads = m.heads;
  m.vocab = f.positive("vocab_size");
  m.max_seq = f.positive("n_positions");
  m.ffn_hidden = f.positive("n_inner", 4 * m.hidden);  // GPT2Config: None -> 4 * n_embd
  m.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  m.tie_embeddings = f.boolean("tie_word_embeddings", true);
  if (m.hidden % m.heads != 0) {
    f.fail("n_head", "n_embd " + std::to_string(m.hidden) + " is not divisible by " + std::to_string(m.heads) + " heads");
  }
  // GPT-2's tanh form of GELU (kernels/gelu.h) under its transformers names.
  const std::string act = f.string("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast") {
    f.fail("activation_function", "\"" + act + "\": plait's GPT-2 MLP uses the tanh form of GELU (\"gelu_new\")");
  }
  f.refuse_unless("scale_attn_weights", true, "plait always scales attention scores by 1/sqrt(head dimension)");
  f.refuse_unless("scale_attn_by_inverse_layer_idx", false, "plait does not scale attention by the layer index");
  f.refuse_unless("reorder_and_upcast_attn", false, "plait does not implement the reordered, upcast attention");
  f.refuse_unless("add_cross_attention", false, "plait's GPT-2 is decoder-only, without cross-attention");
  f.refuse_unless("is_encoder_decoder", false, "plait's GPT-2 is decoder-only");
  // n_ctx: older transformers' name for n_positions' attention mask; dropout and the
  // sequence-summary head's fields do not change the language model.
  f.ignore({"n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
            "summary_activation", "summary_proj_to_labels", "summary_first_dropout"});
  f.check_no_unknown_fields("gpt2");
  return m;
}

}  // namespace

const char* hf_architecture(Family family) {
  return family == Family::gpt2 ? "GPT2LMHeadModel" : "LlamaForCausalLM";
}

ModelSpec read_hf_model_config(const nlohmann::json& config, const std::string& file) {
  HfFields f(config, file);
  if (!f.given("model_type")) f.fail("model_type", "missing; expected \"llama\" or \"gpt2\"");
  const std::string type = f.string("model_type", "");
  if (type == "llama") return read_llama(f);
  if (type == "gpt2") return read_gpt2(f);
  f.fail("model_type", "\"" + type + "\": plait implements \"llama\" (LlamaForCausalLM) and \"gpt2\" (GPT2LMHeadModel)");
}

nlohmann::json hf_model_config_json(const ModelSpec& m, const std::string& torch_dtype, int end_of_text) {
  json j;
  j["architectures"] = {hf_architecture(m.family)};
  if (m.family == Family::llama) {
    j["model_type"] = "llama";
    j["vocab_size"] = m.vocab;
    j["hidden_size"] = m.hidden;
    j["intermediate_size"] = m.ffn_hidden;
    j["num_hidden_layers"] = m.layers;
    j["num_attention_heads"] = m.heads;
    j["num_key_value_heads"] = m.kv_heads;
    j["head_dim"] = m.head_dim();
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = m.max_seq;
    j["rms_norm_eps"] = m.norm_eps;
    j["rope_theta"] = m.rope_theta;
    j["rope_scaling"] = nullptr;
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["attention_dropout"] = 0.0;
    j["pretraining_tp"] = 1;
  } else {
    j["model_type"] = "gpt2";
    j["vocab_size"] = m.vocab;
    j["n_positions"] = m.max_seq;
    j["n_ctx"] = m.max_seq;
    j["n_embd"] = m.hidden;
    j["n_layer"] = m.layers;
    j["n_head"] = m.heads;
    j["n_inner"] = m.ffn_hidden;
    j["activation_function"] = "gelu_new";
    j["layer_norm_epsilon"] = m.norm_eps;
    // plait trains without dropout: fine-tuning there starts as it ended here.
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
  }
  j["tie_word_embeddings"] = m.tie_embeddings;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  if (end_of_text >= 0) {
    j["bos_token_id"] = end_of_text;
    j["eos_token_id"] = end_of_text;
  }
  return j;
}

}  // namespace plait::spec
