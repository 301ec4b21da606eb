#include "plait/model/hf_tensor_names.h"

#include <algorithm>
#include <regex>

#include "plait/core/error.h"

namespace plait::model {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// GPT-2's Conv1D weights.
bool conv1d_weight(std::string_view name) {
  return ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_proj.weight") ||
         ends_with(name, ".mlp.c_fc.weight") || ends_with(name, ".mlp.c_proj.weight");
}

}  // namespace

HfTensor hf_tensor(const spec::ModelSpec& model, const NamedTensor& t) {
  HfTensor out{t.name, t.shape, false};
  if (model.family != spec::Family::gpt2) return out;
  if (t.name == "lm_head.weight") return out;
  out.name = "transformer." + t.name + (t.name == "wte" || t.name == "wpe" ? ".weight" : "");
  if (conv1d_weight(t.name)) {
    if (t.shape.size() != 2) throw Error("gpt2 tensor " + t.name + " is not a matrix");
    out.shape = {t.shape[1], t.shape[0]};
    out.transposed = true;
  }
  return out;
}

bool hf_buffer_tensor(const spec::ModelSpec& model, std::string_view name) {
  static const std::regex gpt2(R"(h\.[0-9]+\.attn\.(bias|masked_bias))");
  static const std::regex llama(R"(model\.layers\.[0-9]+\.self_attn\.rotary_emb\.inv_freq)");
  const std::string s(name);
  return std::regex_match(s, model.family == spec::Family::gpt2 ? gpt2 : llama);
}

void transpose(std::span<const float> in, std::int64_t rows, std::int64_t cols, std::span<float> out) {
  if (in.size() != static_cast<std::size_t>(rows * cols) || out.size() != in.size()) {
    throw Error("transpose: sizes do not match a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix");
  }
  // Blocks of 32 x 32 keep both sides' lines in cache.
  constexpr std::int64_t kBlock = 32;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      for (std::int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r) {
        for (std::int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c) out[c * rows + r] = in[r * cols + c];
      }
    }
  }
}

}  // namespace plait::model
