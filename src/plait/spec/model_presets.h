#pragma once
// Models known by name, used alike by `plait sim`, `plait plan` and `plait bench engine`, and
// reading a model from a JSON config file (its "model" section, model_spec_json.h).
//
//   name           family  layers/hidden/heads (kv)  ffn    vocab   source
//   gpt2-small     gpt2    12 / 768 / 12              3072   50257   GPT-2 small (Radford et al. 2019)
//   gpt-1.3b       gpt2    24 / 2048 / 16             8192   50257   Zorse model_stats (deepspeedgpt_1.3b)
//   gpt-2.7b       gpt2    32 / 2560 / 32            10240   50257   Seq1F1B paper (arXiv 2406.03488)
//   gpt-7b         gpt2    32 / 4096 / 32            16384   50257   idem
//   gpt-13b        gpt2    40 / 5120 / 40            20480   50257   idem
//   gpt-30b        gpt2    64 / 6144 / 64            24576   50257   idem
//   tinyllama-1.1b llama   22 / 2048 / 32 (4)         5632   32000   TinyLlama (Zhang et al., arXiv 2401.02385)
//   llama-7b       llama   32 / 4096 / 32            11008   32000   LLaMA (Touvron et al., arXiv 2302.13971)
//   llama-13b      llama   40 / 5120 / 40            13824   32000   idem
//   llama-3-8b     llama   32 / 4096 / 32 (8)        14336  128256   Llama 3 (arXiv 2407.21783), theta 500000
// Presets size max_seq to the requested sequence length (a simulation of 32k tokens of gpt-7b
// gets a 32k position table); a config file's max_seq is the file's.
#include <cstdint>
#include <string>
#include <vector>

#include "plait/spec/model_spec.h"

namespace plait::spec {

struct NamedModel {
  std::string name;    // the preset's name, or the config file's name
  ModelSpec model;
  std::string source;  // where the shape comes from (a citation, or the file's path)
  // The Zorse latency table that measured this model (share/profiles/zorse/), empty if none:
  // device profiles read that table and no other (sim/zorse_profiles.h).
  std::string profile_model;
};

const std::vector<NamedModel>& model_presets();
std::string model_preset_names();  // "gpt2-small, gpt-1.3b, ..."
// One line per preset, for --help: "llama-7b        llama 32/4096/32, ffn 11008, vocab 32000,
// untied LM head".
std::string model_preset_lines();
// The preset called `name`, or nullptr.
const NamedModel* find_model_preset(const std::string& name);

// A preset name (max_seq set to `seq`) or a JSON config path whose "model" section is read
// (model_spec_json.h; other sections are ignored). Throws plait::Error: an unknown name, a bad
// file, or `seq` beyond the file's max_seq.
NamedModel resolve_model(const std::string& name_or_path, std::int64_t seq);

}  // namespace plait::spec
