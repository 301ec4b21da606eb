#pragma once
// Where each parameter tensor of a stage lives in its single contiguous buffer (the llm.c idea of
// one allocation carved by a size table, with names). Names are global and follow GPT-2's
// Hugging Face names ("wte", "wpe", "h.<layer>.attn.c_attn.weight", ..., "ln_f.weight",
// "lm_head.weight"), so a tensor is the same tensor whichever stage holds it. Linear weights are
// stored (out_features, in_features) as in llm.c (Hugging Face's Conv1D stores the transpose).
//
// Tied embeddings: with tie_embeddings, a stage with the embedding and/or the head holds "wte";
// when one stage has both, the embedding and the LM head share that one tensor; when they are on
// different stages, each holds its own copy named "wte", initialised identically, and the
// runtime must all-reduce the two copies' gradients (and count that gradient once in the global
// norm) so they stay equal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plait/model/gpt_config.h"
#include "plait/model/stage_spec.h"

namespace plait::model {

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;  // in floats, into the stage's parameter (and gradient) buffer
  std::size_t numel = 0;
  bool weight_decay = false;  // matrices and embeddings decay; biases and LayerNorm gains do not
};

// Offsets are multiples of 16 floats (64 bytes) so every tensor starts cache-line aligned; the
// padding between tensors is zero in parameters and gradients.
inline constexpr std::size_t kTensorAlignment = 16;

// The stage's tensors in buffer order: wte, wpe (embedding); per layer ln_1, attn.c_attn,
// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj (weight then bias); ln_f, then wte (head-only stage,
// tied) or lm_head.weight (untied).
std::vector<NamedTensor> parameter_layout(const GPTConfig& config, const StageSpec& spec);

// Floats the buffer needs (end of the last tensor).
std::size_t layout_size(const std::vector<NamedTensor>& tensors);

// "h.<layer>.<suffix>", e.g. layer_tensor_name(3, "attn.c_attn.weight").
std::string layer_tensor_name(int layer, std::string_view suffix);

// The tensor named `name`; throws plait::Error if the stage does not hold it.
const NamedTensor& find_tensor(const std::vector<NamedTensor>& tensors, std::string_view name);

}  // namespace plait::model
