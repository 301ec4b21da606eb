#include "plait/spec/model_presets.h"

#include <algorithm>
#include <filesystem>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/spec/model_spec_json.h"

namespace plait::spec {
namespace {

constexpr int kGpt2Vocab = 50257;   // GPT-2 byte-level BPE (Radford et al. 2019)
constexpr int kLlamaVocab = 32000;  // LLaMA's SentencePiece vocabulary

NamedModel gpt(const char* name, int layers, int hidden, int heads, std::int64_t max_seq,
               const char* source, const char* profile = "") {
  return {name, gpt2_model(layers, hidden, heads, kGpt2Vocab, max_seq), source, profile};
}

NamedModel llama(const char* name, int layers, int hidden, int heads, int kv_heads, int ffn,
                 int vocab, double theta, double eps, std::int64_t max_seq, const char* source,
                 const char* profile = "") {
  ModelSpec m;
  m.family = Family::llama;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.max_seq = max_seq;
  m.norm_eps = eps;
  m.rope_theta = theta;
  m.tie_embeddings = false;
  return {name, m, source, profile};
}

}  // namespace

const std::vector<NamedModel>& model_presets() {
  static const std::vector<NamedModel> presets = {
      gpt("gpt2-small", 12, 768, 12, 1024, "GPT-2 small (Radford et al. 2019; HF gpt2)"),
      gpt("gpt-1.3b", 24, 2048, 16, 2048,
          "layers/hidden: Zorse model_stats.json (deepspeedgpt_1.3b); 16 heads of 128 as in "
          "Megatron-LM GPT 1.3B configurations",
          "deepspeedgpt_1.3b"),
      gpt("gpt-2.7b", 32, 2560, 32, 2048, "Seq1F1B paper's 2.7B shape (arXiv 2406.03488)",
          "deepspeedgpt_2.7b"),
      gpt("gpt-7b", 32, 4096, 32, 2048,
          "Seq1F1B paper's 7B shape (arXiv 2406.03488); Zorse measured it as deepspeedgpt_6.7b",
          "deepspeedgpt_6.7b"),
      gpt("gpt-13b", 40, 5120, 40, 2048, "Seq1F1B paper's 13B shape (arXiv 2406.03488)"),
      gpt("gpt-30b", 64, 6144, 64, 2048, "Seq1F1B paper's 30B shape (arXiv 2406.03488)"),
      llama("tinyllama-1.1b", 22, 2048, 32, 4, 5632, kLlamaVocab, 10000.0, 1e-5, 2048,
            "TinyLlama-1.1B (Zhang et al., arXiv 2401.02385; HF TinyLlama/TinyLlama_v1.1)",
            "deepspeedllama_tiny"),
      llama("llama-7b", 32, 4096, 32, 32, 11008, kLlamaVocab, 10000.0, 1e-6, 2048,
            "LLaMA-7B (Touvron et al., arXiv 2302.13971, table 2; HF huggyllama/llama-7b)",
            "deepspeedllama_7b"),
      llama("llama-13b", 40, 5120, 40, 40, 13824, kLlamaVocab, 10000.0, 1e-6, 2048,
            "LLaMA-13B (Touvron et al., arXiv 2302.13971, table 2; HF huggyllama/llama-13b)",
            "deepspeedllama_13b"),
      llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 500000.0, 1e-5, 8192,
            "Llama-3-8B (Llama team, arXiv 2407.21783, table 3; HF meta-llama/Meta-Llama-3-8B)"),
  };
  return presets;
}

std::string model_preset_names() {
  std::string names;
  for (const NamedModel& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

std::string model_preset_lines() {
  std::size_t width = 0;
  for (const NamedModel& p : model_presets()) width = std::max(width, p.name.size());
  std::string lines;
  for (const NamedModel& p : model_presets()) {
    const ModelSpec& m = p.model;
    std::string heads = std::to_string(m.heads);
    if (m.kv_heads != m.heads) heads += " (" + std::to_string(m.kv_heads) + " kv)";
    lines += (lines.empty() ? "" : "\n") + p.name + std::string(width + 2 - p.name.size(), ' ') +
             std::string(family_name(m.family)) + " " + std::to_string(m.layers) + "/" +
             std::to_string(m.hidden) + "/" + heads + ", ffn " + std::to_string(m.ffn_hidden) +
             ", vocab " + std::to_string(m.vocab) + (m.tie_embeddings ? "" : ", untied LM head");
  }
  return lines;
}

const NamedModel* find_model_preset(const std::string& name) {
  for (const NamedModel& p : model_presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

NamedModel resolve_model(const std::string& name_or_path, std::int64_t seq) {
  if (const NamedModel* preset = find_model_preset(name_or_path)) {
    NamedModel named = *preset;
    named.model.max_seq = seq;
    check_model_spec(named.model, named.name);
    return named;
  }
  if (!std::filesystem::is_regular_file(name_or_path)) {
    throw Error("--model: '" + name_or_path + "' is neither a preset (" + model_preset_names() +
                ") nor an existing config file");
  }
  const nlohmann::json json = read_json_file(name_or_path);
  const JsonFields root(json, name_or_path);
  NamedModel named;
  named.name = std::filesystem::path(name_or_path).filename().string();
  named.source = name_or_path;
  named.model = read_model_spec(root.object("model"));
  if (seq > named.model.max_seq) {
    throw InputError(name_or_path, "model.max_seq",
                     "the requested sequence of " + std::to_string(seq) +
                         " tokens is longer than max_seq " + std::to_string(named.model.max_seq));
  }
  return named;
}

}  // namespace plait::spec
