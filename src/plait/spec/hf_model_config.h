#pragma once
// A Hugging Face model's config.json as plait's model description, both ways (docs/
// checkpoints.md, "Hugging Face"): transformers' LlamaConfig (model_type "llama",
// LlamaForCausalLM) and GPT2Config (model_type "gpt2", GPT2LMHeadModel).
//
// Reading is strict in plait's way, with one difference: a config.json carries many fields
// that do not change the function the weights compute (dropout rates, token ids, generation
// defaults, bookkeeping), which are read and ignored. A field that would change it and that
// plait does not implement is refused in one line naming it (rope_scaling, attention_bias,
// mlp_bias, a head_dim other than hidden_size / num_attention_heads, an activation other than
// the family's, GPT-2's scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn, ...), and
// so is a field plait does not know at all: refusing is better than guessing what it changes.
#include <string>

#include <nlohmann/json.hpp>

#include "plait/spec/model_spec.h"

namespace plait::spec {

// `file` names config.json in messages ("<file>: <field>: <problem>").
ModelSpec read_hf_model_config(const nlohmann::json& config, const std::string& file);

// What an exported config.json holds: every field the family's config class reads for the
// shape, and the ones that must be off written as off. `torch_dtype` is "float32", "bfloat16"
// or "float16"; `end_of_text` >= 0 sets bos_token_id and eos_token_id (GPT-2's <|endoftext|>).
nlohmann::json hf_model_config_json(const ModelSpec& model, const std::string& torch_dtype, int end_of_text = -1);

// The architecture class a family is exported as: "LlamaForCausalLM", "GPT2LMHeadModel".
const char* hf_architecture(Family family);

}  // namespace plait::spec
