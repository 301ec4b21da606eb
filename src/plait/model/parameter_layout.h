#pragma once
// Where each parameter tensor of a stage lives in its single contiguous buffer (the llm.c idea of
// one allocation carved by a size table, with names). Names are global and follow Hugging Face's
// state dicts, so a tensor is the same tensor whichever stage holds it and a checkpoint opens
// there unchanged (docs/checkpoints.md, "Tensor names"):
//   gpt2   GPT2LMHeadModel without the "transformer." prefix: "wte", "wpe",
//          "h.<layer>.attn.c_attn.weight", ..., "ln_f.weight", "lm_head.weight";
//   llama  LlamaForCausalLM: "model.embed_tokens.weight",
//          "model.layers.<layer>.self_attn.q_proj.weight", ..., "model.norm.weight",
//          "lm_head.weight".
// Linear weights are stored (out_features, in_features), as torch.nn.Linear stores them (GPT-2's
// Hugging Face Conv1D stores the transpose: c_attn, c_proj, c_fc are (in, out) there).
//
// Two tensors whose rows one matmul produces together sit back to back with no padding: gpt2's
// c_attn (q, k, v rows in one tensor already) and llama's k_proj + v_proj and gate_proj +
// up_proj, so the block runs one GEMM for K|V and one for gate|up (layout_group below).
//
// Tied embeddings: with tie_embeddings, a stage with the embedding and/or the head holds the
// token table; when one stage has both, the embedding and the LM head share that one tensor;
// when they are on different stages, each holds its own copy under the same name, initialised
// identically, and the runtime must all-reduce the two copies' gradients (and count that
// gradient once in the global norm) so they stay equal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plait/model/stage_spec.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::model {

// How a tensor starts (parameter_init.h): N(0, std), or every element equal to a constant.
struct TensorInit {
  enum class Kind { normal, constant } kind = Kind::normal;
  double value = 0.0;  // the std of the normal, or the constant
};

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;  // of what the stage holds (a TP rank: its part)
  std::size_t offset = 0;  // in floats, into the stage's parameter (and gradient) buffer
  std::size_t numel = 0;
  bool weight_decay = false;  // matrices and embeddings decay; biases and norm gains do not
  TensorInit init;
  // Tensor parallelism (spec/tensor_parallel_plan.h; all defaults without it): the whole
  // tensor's shape, the part of it this rank holds (dim -1: all of it; vocabulary ranges index
  // the padded table), whether every rank of the group holds it whole (counted once in the
  // global gradient norm) and whether its gradient is partial (computed on the rank's sequence
  // slice: the norms) and so all-reduced over the group.
  std::vector<std::int64_t> full_shape;
  spec::TensorShard shard;
  bool tp_replicated = true;
  bool tp_all_reduced = false;

  std::size_t full_numel() const;
};

// Offsets are multiples of 16 floats (64 bytes) so every tensor starts cache-line aligned; the
// padding between tensors is zero in parameters and gradients.
inline constexpr std::size_t kTensorAlignment = 16;

// The stage's tensors in buffer order: embedding; per layer the family's tensors; final norm,
// then the head's matrix (tied copy or lm_head.weight) where the stage needs one. With tensor
// parallelism (spec.tensor_parallel > 1) each is rank spec.tp_rank's part (spec::tensor_shard):
// a column-split tensor the rows of its blocks back to back (GPT-2's c_attn: the rank's q, then
// k, then v rows), a row-split one its columns, a vocabulary one its rows of the padded table.
std::vector<NamedTensor> parameter_layout(const spec::ModelSpec& model, const StageSpec& spec);

// Floats the buffer needs (end of the last tensor).
std::size_t layout_size(const std::vector<NamedTensor>& tensors);

// A layer's tensor by its family-local suffix: "h.3.attn.c_attn.weight" (gpt2),
// "model.layers.3.self_attn.q_proj.weight" (llama).
std::string layer_tensor_name(const spec::ModelSpec& model, int layer, std::string_view suffix);
// The token embedding table ("wte" | "model.embed_tokens.weight"), which a tied head shares.
std::string embedding_tensor_name(const spec::ModelSpec& model);
// The LM head's matrix: the embedding table when tied, else "lm_head.weight".
std::string head_tensor_name(const spec::ModelSpec& model);
// The final norm's gain ("ln_f.weight" | "model.norm.weight") and gpt2's bias ("ln_f.bias").
std::string final_norm_name(const spec::ModelSpec& model, std::string_view what = "weight");

// The tensor named `name`; throws plait::Error if the stage does not hold it.
const NamedTensor& find_tensor(const std::vector<NamedTensor>& tensors, std::string_view name);

}  // namespace plait::model
