#pragma once
// The "model" section of configs, plan files and `--model FILE`, read strictly:
//   family          "gpt2" (default) | "llama"
//   layers, hidden, heads, vocab, max_seq    positive integers
//   ffn_hidden      MLP width; gpt2 default 4 * hidden, required for llama
//   kv_heads        llama only; default heads (multi-head attention)
//   rope_theta      llama only; default 10000
//   norm_eps        default 1e-5 (GPT-2's layer_norm_epsilon, LLaMA's rms_norm_eps)
//   tie_embeddings  default true for gpt2, false for llama
// A field of the other family, an unknown field or an impossible shape is an InputError naming
// the file and field (docs/config.md, "model").
#include <nlohmann/json.hpp>

#include "plait/core/json_fields.h"
#include "plait/spec/model_spec.h"

namespace plait::spec {

ModelSpec read_model_spec(const JsonFields& model_section);

// The section as a file holds it, every field explicit; read_model_spec reads it back equal.
nlohmann::json model_spec_json(const ModelSpec& model);

}  // namespace plait::spec
