#pragma once
// The models the simulator knows by name, and reading a model from a JSON config file.
//
// Presets (layers / hidden / heads; vocabulary 50257, the GPT-2 BPE size):
//   gpt-1.3b  24 / 2048 / 16   layers and hidden from Zorse's model_stats.json (deepspeedgpt_1.3b);
//                              16 heads of 128 as in Megatron-LM's GPT 1.3B configurations
//   gpt-2.7b  32 / 2560 / 32   Seq1F1B paper's model shapes (../shared/reference/seq1f1b.md)
//   gpt-7b    32 / 4096 / 32   idem
//   gpt-13b   40 / 5120 / 40   idem
//   gpt-30b   64 / 6144 / 64   idem
// Presets size their learned position table to the simulated sequence length (max_seq = --seq).
// A config file is JSON whose "model" object is {layers, hidden, heads, vocab, max_seq}; other
// top-level sections are ignored (they belong to other tools), unknown fields inside "model"
// are errors.
#include <cstdint>
#include <string>
#include <vector>

#include "plait/schedule/model_shape.h"

namespace plait::sim {

struct ModelSpec {
  std::string name;
  schedule::ModelShape shape;
  std::string source;
};

struct ModelPreset {
  std::string name;
  int layers, hidden, heads;
  std::string source;
};

const std::vector<ModelPreset>& model_presets();
std::string model_preset_names();  // "gpt-1.3b, gpt-2.7b, ..."

// A preset name or a JSON config path. Throws plait::Error (unknown name, bad file, seq longer
// than the model's max_seq).
ModelSpec resolve_model(const std::string& name_or_path, std::int64_t seq);

}  // namespace plait::sim
