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
//   llama-7b  32 / 4096 / 32, vocabulary 32000, untied embeddings: the LLaMA-7B shape (Touvron
//             et al., arXiv 2302.13971, table 2) approximated by plait's GPT block: LLaMA's
//             SwiGLU MLP (3 x 4096 x 11008) has 202.4M parameters per layer with attention, the
//             GPT block 12H^2 + 13H = 201.4M (0.5% fewer), and its FLOPs differ by as much; Zorse
//             measured it as deepspeedllama_7b, which device profiles then use.
// Presets size their learned position table to the simulated sequence length (max_seq = --seq).
// A config file is JSON whose "model" object is {layers, hidden, heads, vocab, max_seq,
// tie_embeddings (optional)}; other top-level sections are ignored (they belong to other
// tools), unknown fields inside "model" are errors.
#include <cstdint>
#include <string>
#include <vector>

#include "plait/schedule/model_shape.h"

namespace plait::sim {

struct ModelSpec {
  std::string name;
  schedule::ModelShape shape;
  std::string source;
  bool tie_embeddings = true;  // the LM head shares the token embedding (GPT-2)
  std::string profile_model;   // the model Zorse's latency table measured for this shape, if any
};

struct ModelPreset {
  std::string name;
  int layers, hidden, heads;
  std::string source;
  int vocab = 50257;  // GPT-2 byte-level BPE (Radford et al. 2019)
  bool tie_embeddings = true;
  std::string profile_model = {};
};

const std::vector<ModelPreset>& model_presets();
std::string model_preset_names();  // "gpt-1.3b, gpt-2.7b, ..."
// One line per preset, for --help: "gpt-7b    32/4096/32, vocab 50257" (layers/hidden/heads), and
// ", untied LM head" when the head does not share the embedding.
std::string model_preset_lines();

// A preset name or a JSON config path. Throws plait::Error (unknown name, bad file, seq longer
// than the model's max_seq).
ModelSpec resolve_model(const std::string& name_or_path, std::int64_t seq);

}  // namespace plait::sim
