#include "plait/sim/model_presets.h"

#include <algorithm>
#include <filesystem>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"

namespace plait::sim {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt-1.3b", 24, 2048, 16,
       "layers/hidden: Zorse model_stats.json (deepspeedgpt_1.3b); 16 heads of 128 as in "
       "Megatron-LM GPT 1.3B configurations"},
      {"gpt-2.7b", 32, 2560, 32, "Seq1F1B paper's 2.7B shape (arXiv 2406.03488)"},
      {"gpt-7b", 32, 4096, 32, "Seq1F1B paper's 7B shape (arXiv 2406.03488)"},
      {"gpt-13b", 40, 5120, 40, "Seq1F1B paper's 13B shape (arXiv 2406.03488)"},
      {"gpt-30b", 64, 6144, 64, "Seq1F1B paper's 30B shape (arXiv 2406.03488)"},
      {"llama-7b", 32, 4096, 32,
       "LLaMA-7B shape (Touvron et al., arXiv 2302.13971) as a GPT block (0.5% fewer parameters "
       "than SwiGLU's); vocabulary 32000; Zorse profiles deepspeedllama_7b",
       32000, false, "deepspeedllama_7b"},
  };
  return presets;
}

std::string model_preset_names() {
  std::string names;
  for (const ModelPreset& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

std::string model_preset_lines() {
  std::size_t width = 0;
  for (const ModelPreset& p : model_presets()) width = std::max(width, p.name.size());
  std::string lines;
  for (const ModelPreset& p : model_presets()) {
    lines += (lines.empty() ? "" : "\n") + p.name + std::string(width + 2 - p.name.size(), ' ') +
             std::to_string(p.layers) + "/" + std::to_string(p.hidden) + "/" + std::to_string(p.heads) +
             ", vocab " + std::to_string(p.vocab) + (p.tie_embeddings ? "" : ", untied LM head");
  }
  return lines;
}

ModelSpec resolve_model(const std::string& name_or_path, std::int64_t seq) {
  for (const ModelPreset& p : model_presets()) {
    if (p.name == name_or_path) {
      ModelSpec spec{p.name, {p.layers, p.hidden, p.heads, p.vocab, seq}, p.source, p.tie_embeddings,
                     p.profile_model};
      schedule::check_model_shape(spec.shape, p.name);
      return spec;
    }
  }
  if (!std::filesystem::exists(name_or_path)) {
    throw Error("--model: '" + name_or_path + "' is neither a preset (" + model_preset_names() +
                ") nor an existing config file");
  }
  const nlohmann::json json = read_json_file(name_or_path);
  JsonFields root(json, name_or_path);
  JsonFields model = root.object("model");
  ModelSpec spec;
  spec.name = std::filesystem::path(name_or_path).filename().string();
  spec.source = name_or_path;
  spec.shape.layers = static_cast<int>(model.integer_in("layers", 1, 1 << 20));
  spec.shape.hidden = static_cast<int>(model.integer_in("hidden", 1, 1 << 24));
  spec.shape.heads = static_cast<int>(model.integer_in("heads", 1, 1 << 20));
  spec.shape.vocab = static_cast<int>(model.integer_in("vocab", 1, 1 << 30));
  spec.shape.max_seq = model.integer_in("max_seq", 1, std::int64_t{1} << 40);
  spec.tie_embeddings = model.boolean("tie_embeddings", true);
  model.check_no_unknown_fields();
  schedule::check_model_shape(spec.shape, name_or_path + ": model");
  if (seq > spec.shape.max_seq) {
    throw InputError(name_or_path, "model.max_seq",
                     "the simulated sequence of " + std::to_string(seq) +
                         " tokens is longer than max_seq " + std::to_string(spec.shape.max_seq));
  }
  return spec;
}

}  // namespace plait::sim
