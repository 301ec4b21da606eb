#include "plait/spec/model_spec.h"

#include <cmath>

#include "plait/core/error.h"

namespace plait::spec {

std::string_view family_name(Family family) {
  return family == Family::gpt2 ? "gpt2" : "llama";
}

Family parse_family(std::string_view name) {
  if (name == "gpt2") return Family::gpt2;
  if (name == "llama") return Family::llama;
  throw Error("unknown model family '" + std::string(name) + "'; expected gpt2 or llama");
}

std::int64_t ModelSpec::layer_parameters() const {
  const std::int64_t c = hidden, k = kv_dim(), f = ffn_hidden;
  if (family == Family::gpt2) {
    return 4 * c + (c + 2 * k) * (c + 1) + c * (c + 1) + f * (c + 1) + c * (f + 1);
  }
  return 2 * c + 2 * c * c + 2 * k * c + 3 * f * c;
}

std::int64_t ModelSpec::embedding_parameters() const {
  const std::int64_t c = hidden;
  return std::int64_t{vocab} * c + (learned_positions() ? max_seq * c : 0);
}

std::int64_t ModelSpec::head_parameters(bool holds_embedding) const {
  const std::int64_t c = hidden;
  const std::int64_t norm = has_biases() ? 2 * c : c;
  const bool own_head = !tie_embeddings || !holds_embedding;
  return norm + (own_head ? std::int64_t{vocab} * c : 0);
}

std::int64_t ModelSpec::stage_parameters(int stage_layers, bool embedding, bool head) const {
  return stage_layers * layer_parameters() + (embedding ? embedding_parameters() : 0) +
         (head ? head_parameters(embedding) : 0);
}

double ModelSpec::layer_linear_flops(std::int64_t length) const {
  const double s = static_cast<double>(length), c = hidden;
  return 2.0 * s * c * (2.0 * c + 2.0 * kv_dim()) + 2.0 * s * c * ffn_hidden * mlp_matrices();
}

double ModelSpec::layer_attention_flops(std::int64_t start, std::int64_t length) const {
  const double s = static_cast<double>(length);
  const double e = static_cast<double>(start + length);
  return (4.0 * head_dim() + 3.0) * heads * (s * e - s * s / 2.0);
}

double ModelSpec::layer_recompute_flops(std::int64_t start, std::int64_t length) const {
  const double s = static_cast<double>(length), c = hidden;
  const double skipped = 2.0 * s * c * 2.0 * kv_dim() + 2.0 * s * c * ffn_hidden;
  return layer_linear_flops(length) - skipped + layer_attention_flops(start, length);
}

double ModelSpec::vocab_flops(std::int64_t length) const {
  return 4.0 * static_cast<double>(length) * hidden * static_cast<double>(vocab);
}

double ModelSpec::segment_forward_flops(std::int64_t start, std::int64_t length) const {
  return vocab_flops(length) +
         layers * (layer_linear_flops(length) + layer_attention_flops(start, length));
}

ModelSpec gpt2_model(int layers, int hidden, int heads, int vocab, std::int64_t max_seq,
                     bool tie_embeddings) {
  ModelSpec m;
  m.family = Family::gpt2;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.max_seq = max_seq;
  m.tie_embeddings = tie_embeddings;
  return m;
}

void check_model_spec(const ModelSpec& m, const std::string& file, const std::string& section) {
  auto fail = [&](const char* field, const std::string& problem) {
    throw InputError(file, section + "." + field, problem);
  };
  auto positive = [&](const char* field, std::int64_t value) {
    if (value < 1) fail(field, "expected a positive integer, found " + std::to_string(value));
  };
  positive("layers", m.layers);
  positive("hidden", m.hidden);
  positive("heads", m.heads);
  positive("kv_heads", m.kv_heads);
  positive("ffn_hidden", m.ffn_hidden);
  positive("vocab", m.vocab);
  positive("max_seq", m.max_seq);
  if (m.hidden % m.heads != 0) {
    fail("heads", "hidden " + std::to_string(m.hidden) + " is not divisible by heads " +
                      std::to_string(m.heads));
  }
  if (m.heads % m.kv_heads != 0) {
    fail("kv_heads", "heads " + std::to_string(m.heads) + " is not divisible by kv_heads " +
                         std::to_string(m.kv_heads));
  }
  if (m.family == Family::gpt2 && m.kv_heads != m.heads) {
    fail("kv_heads", "gpt2 models use multi-head attention (kv_heads = heads " +
                         std::to_string(m.heads) + "), found " + std::to_string(m.kv_heads));
  }
  if (m.family == Family::llama && m.head_dim() % 2 != 0) {
    fail("heads", "rotary positions need an even head dimension; hidden " +
                      std::to_string(m.hidden) + " / heads " + std::to_string(m.heads) + " = " +
                      std::to_string(m.head_dim()));
  }
  if (!(m.norm_eps > 0) || !std::isfinite(m.norm_eps)) {
    fail("norm_eps", "expected a positive finite number, found " + std::to_string(m.norm_eps));
  }
  if (!(m.rope_theta > 0) || !std::isfinite(m.rope_theta)) {
    fail("rope_theta", "expected a positive finite number, found " + std::to_string(m.rope_theta));
  }
}

std::string describe(const ModelSpec& m) {
  std::string s = std::string(family_name(m.family)) + " " + std::to_string(m.layers) +
                  " layers, hidden " + std::to_string(m.hidden) + ", " + std::to_string(m.heads) +
                  " heads";
  if (m.kv_heads != m.heads) s += " (" + std::to_string(m.kv_heads) + " kv)";
  s += ", ffn " + std::to_string(m.ffn_hidden) + ", vocab " + std::to_string(m.vocab);
  if (!m.tie_embeddings) s += ", untied LM head";
  return s;
}

}  // namespace plait::spec
