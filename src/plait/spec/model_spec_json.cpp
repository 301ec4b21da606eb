#include "plait/spec/model_spec_json.h"

namespace plait::spec {

ModelSpec read_model_spec(const JsonFields& m) {
  ModelSpec s;
  const std::string family = m.string("family", "gpt2");
  if (family != "gpt2" && family != "llama") {
    m.fail("family", "expected \"gpt2\" or \"llama\", found \"" + family + "\"");
  }
  s.family = parse_family(family);
  const bool llama = s.family == Family::llama;
  // Bounds stop absurd values early; the engine checks its own narrower limits
  // (model/engine_limits.h) before it allocates.
  s.layers = static_cast<int>(m.integer_in("layers", 1, 1 << 20));
  s.hidden = static_cast<int>(m.integer_in("hidden", 1, 1 << 20));
  s.heads = static_cast<int>(m.integer_in("heads", 1, 1 << 20));
  s.vocab = static_cast<int>(m.integer_in("vocab", 1, 1 << 30));
  s.max_seq = m.integer_in("max_seq", 1, std::int64_t{1} << 40);
  s.norm_eps = m.number("norm_eps", 1e-5);
  s.tie_embeddings = m.boolean("tie_embeddings", !llama);
  if (llama) {
    s.ffn_hidden = static_cast<int>(m.integer_in("ffn_hidden", 1, 1 << 24));
    s.kv_heads = static_cast<int>(m.integer_in("kv_heads", 1, 1 << 20, s.heads));
    s.rope_theta = m.number("rope_theta", 10000.0);
  } else {
    s.ffn_hidden = static_cast<int>(m.integer_in("ffn_hidden", 1, 1 << 24, 4 * std::int64_t{s.hidden}));
    s.kv_heads = s.heads;
    for (const char* field : {"kv_heads", "rope_theta"}) {
      if (m.has(field)) {
        m.fail(field, "a llama field; gpt2 models have multi-head attention and learned positions "
                      "(set \"family\": \"llama\" to use it)");
      }
    }
  }
  m.check_no_unknown_fields();
  const std::string path = m.field_path("");
  check_model_spec(s, m.file(), path.empty() ? "model" : path.substr(0, path.size() - 1));
  return s;
}

nlohmann::json model_spec_json(const ModelSpec& s) {
  nlohmann::json j = {{"family", std::string(family_name(s.family))},
                      {"layers", s.layers},
                      {"hidden", s.hidden},
                      {"heads", s.heads},
                      {"ffn_hidden", s.ffn_hidden},
                      {"vocab", s.vocab},
                      {"max_seq", s.max_seq},
                      {"norm_eps", s.norm_eps},
                      {"tie_embeddings", s.tie_embeddings}};
  if (s.family == Family::llama) {
    j["kv_heads"] = s.kv_heads;
    j["rope_theta"] = s.rope_theta;
  }
  return j;
}

}  // namespace plait::spec
