#pragma once
// The shape of a GPT-2-style model (Radford et al. 2019): learned absolute positions, pre-LN
// blocks, causal multi-head attention, 4x GELU MLP, final LayerNorm, LM head tied to the token
// embedding unless tie_embeddings is false.
#include <cstdint>

#include "plait/core/json_fields.h"

namespace plait::model {

struct GPTConfig {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int vocab = 0;
  int max_seq = 0;
  bool tie_embeddings = true;

  int head_dim() const { return hidden / heads; }
  int ffn() const { return 4 * hidden; }
  // Parameters of the whole model:
  //   V*C (wte) + S*C (wpe) + L*(12C^2 + 13C) (blocks) + 2C (ln_f) [+ V*C lm_head if untied].
  std::int64_t parameter_count() const;
  // Parameters of one transformer block: 12C^2 + 13C.
  std::int64_t block_parameter_count() const;

  bool operator==(const GPTConfig&) const = default;
};

// Reads the "model" section strictly: layers, hidden, heads, vocab, max_seq (positive integers),
// tie_embeddings (optional, default true); unknown fields and impossible shapes are InputErrors
// naming the file and field, e.g. "cfg.json: model.heads: hidden 100 is not divisible by heads 3".
GPTConfig parse_gpt_config(const JsonFields& model_section);

}  // namespace plait::model
