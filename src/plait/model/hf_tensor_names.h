#pragma once
// plait's parameter tensors under Hugging Face's names (docs/checkpoints.md, "Hugging Face"):
//   llama  LlamaForCausalLM's state dict: plait's names already (parameter_layout.h).
//   gpt2   GPT2LMHeadModel's: "transformer." before every tensor but lm_head.weight, ".weight"
//          after the two tables (wte -> transformer.wte.weight), and the four Conv1D weights
//          (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) TRANSPOSED: transformers' Conv1D
//          stores (in_features, out_features) and computes x @ W + b, where plait stores
//          (out, in) as torch.nn.Linear does (modeling_gpt2.py / pytorch_utils.py Conv1D).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plait/model/parameter_layout.h"
#include "plait/spec/model_spec.h"

namespace plait::model {

struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;  // as Hugging Face stores it
  bool transposed = false;          // a 2-D tensor stored as plait's transpose
};

// The Hugging Face tensor of plait's tensor `t` (a tensor of parameter_layout(model, ...)).
HfTensor hf_tensor(const spec::ModelSpec& model, const NamedTensor& t);

// Tensors a Hugging Face directory may hold that are no parameters and carry nothing plait
// needs: GPT-2's causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias, saved by older
// transformers) and LLaMA's rotary inv_freq buffers (model.layers.N.self_attn.rotary_emb.
// inv_freq). `name` without GPT-2's "transformer." prefix.
bool hf_buffer_tensor(const spec::ModelSpec& model, std::string_view name);

// (rows, cols) -> (cols, rows) of a row-major matrix.
void transpose(std::span<const float> in, std::int64_t rows, std::int64_t cols, std::span<float> out);

}  // namespace plait::model
