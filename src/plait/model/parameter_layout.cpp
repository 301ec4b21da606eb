#include "plait/model/parameter_layout.h"

#include <cmath>

#include "plait/core/error.h"

namespace plait::model {
namespace {

using spec::Family;

std::size_t aligned(std::size_t n) {
  return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

class LayoutBuilder {
 public:
  LayoutBuilder(const spec::ModelSpec& model, const StageSpec& spec) : model_(model), spec_(spec) {}
  // A matrix (decays, N(0, std)), or a vector (no decay, constant `fill`).
  void matrix(std::string name, std::vector<std::int64_t> shape, double std) {
    add(std::move(name), std::move(shape), true, {TensorInit::Kind::normal, std}, true);
  }
  void vector(std::string name, std::int64_t n, double fill) {
    add(std::move(name), {n}, false, {TensorInit::Kind::constant, fill}, true);
  }
  // The first matrix of a layout group: the next tensor follows it with no padding.
  void grouped_matrix(std::string name, std::vector<std::int64_t> shape, double std) {
    add(std::move(name), std::move(shape), true, {TensorInit::Kind::normal, std}, false);
  }
  std::vector<NamedTensor> take() { return std::move(tensors_); }

 private:
  void add(std::string name, std::vector<std::int64_t> shape, bool decays, TensorInit init, bool pad) {
    NamedTensor t{std::move(name), shape, next_, 0, decays, init};
    t.full_shape = shape;
    if (spec_.tensor_parallel > 1) {
      const spec::TensorSplitRule& rule = spec::tensor_split_rule(model_, t.name);
      t.shard = spec::tensor_shard(model_, rule, spec_.tensor_parallel, spec_.tp_rank);
      t.tp_replicated = rule.split == spec::TensorSplit::replicated;
      t.tp_all_reduced = t.tp_replicated && rule.sequence_parallel;
      if (t.shard.dim >= 0) {
        std::int64_t held = 0;
        for (const auto& [begin, length] : t.shard.ranges) held += length;
        t.shape[static_cast<std::size_t>(t.shard.dim)] = held;
      }
    }
    t.numel = 1;
    for (auto d : t.shape) t.numel *= static_cast<std::size_t>(d);
    tensors_.push_back(std::move(t));
    next_ = pad ? aligned(next_ + tensors_.back().numel) : next_ + tensors_.back().numel;
  }
  const spec::ModelSpec& model_;
  const StageSpec& spec_;
  std::vector<NamedTensor> tensors_;
  std::size_t next_ = 0;
};

// GPT-2 initialisation (Radford et al. 2019, sec. 2.3; nanoGPT _init_weights): weights and
// embeddings N(0, 0.02), the residual output projections N(0, 0.02 / sqrt(2 * layers)), biases
// 0, LayerNorm gains 1.
void gpt2_layer(LayoutBuilder& b, const spec::ModelSpec& m, int l) {
  const std::int64_t c = m.hidden, f = m.ffn_hidden, k = m.kv_dim();
  const double residual = 0.02 / std::sqrt(2.0 * m.layers);
  auto name = [&](const char* suffix) { return layer_tensor_name(m, l, suffix); };
  b.vector(name("ln_1.weight"), c, 1.0);
  b.vector(name("ln_1.bias"), c, 0.0);
  b.matrix(name("attn.c_attn.weight"), {c + 2 * k, c}, 0.02);
  b.vector(name("attn.c_attn.bias"), c + 2 * k, 0.0);
  b.matrix(name("attn.c_proj.weight"), {c, c}, residual);
  b.vector(name("attn.c_proj.bias"), c, 0.0);
  b.vector(name("ln_2.weight"), c, 1.0);
  b.vector(name("ln_2.bias"), c, 0.0);
  b.matrix(name("mlp.c_fc.weight"), {f, c}, 0.02);
  b.vector(name("mlp.c_fc.bias"), f, 0.0);
  b.matrix(name("mlp.c_proj.weight"), {c, f}, residual);
  b.vector(name("mlp.c_proj.bias"), c, 0.0);
}

// LLaMA initialisation (Hugging Face LlamaPreTrainedModel._init_weights): every linear layer and
// the embedding N(0, initializer_range = 0.02), RMSNorm gains 1, no biases.
void llama_layer(LayoutBuilder& b, const spec::ModelSpec& m, int l) {
  const std::int64_t c = m.hidden, f = m.ffn_hidden, k = m.kv_dim();
  auto name = [&](const char* suffix) { return layer_tensor_name(m, l, suffix); };
  b.vector(name("input_layernorm.weight"), c, 1.0);
  b.matrix(name("self_attn.q_proj.weight"), {c, c}, 0.02);
  b.grouped_matrix(name("self_attn.k_proj.weight"), {k, c}, 0.02);
  b.matrix(name("self_attn.v_proj.weight"), {k, c}, 0.02);
  b.matrix(name("self_attn.o_proj.weight"), {c, c}, 0.02);
  b.vector(name("post_attention_layernorm.weight"), c, 1.0);
  b.grouped_matrix(name("mlp.gate_proj.weight"), {f, c}, 0.02);
  b.matrix(name("mlp.up_proj.weight"), {f, c}, 0.02);
  b.matrix(name("mlp.down_proj.weight"), {c, f}, 0.02);
}

}  // namespace

std::string layer_tensor_name(const spec::ModelSpec& model, int layer, std::string_view suffix) {
  const char* prefix = model.family == Family::gpt2 ? "h." : "model.layers.";
  return prefix + std::to_string(layer) + "." + std::string(suffix);
}

std::string embedding_tensor_name(const spec::ModelSpec& model) {
  return model.family == Family::gpt2 ? "wte" : "model.embed_tokens.weight";
}

std::string head_tensor_name(const spec::ModelSpec& model) {
  return model.tie_embeddings ? embedding_tensor_name(model) : "lm_head.weight";
}

std::string final_norm_name(const spec::ModelSpec& model, std::string_view what) {
  return (model.family == Family::gpt2 ? "ln_f." : "model.norm.") + std::string(what);
}

std::vector<NamedTensor> parameter_layout(const spec::ModelSpec& m, const StageSpec& spec) {
  validate_stage_spec(m, spec);
  const std::int64_t c = m.hidden, v = m.vocab;
  LayoutBuilder b(m, spec);
  if (spec.has_embedding) {
    b.matrix(embedding_tensor_name(m), {v, c}, 0.02);
    if (m.learned_positions()) b.matrix("wpe", {m.max_seq, c}, 0.02);
  }
  for (int l = spec.first_layer; l < spec.last_layer; ++l) {
    if (m.family == Family::gpt2) {
      gpt2_layer(b, m, l);
    } else {
      llama_layer(b, m, l);
    }
  }
  if (spec.has_head) {
    b.vector(final_norm_name(m), c, 1.0);
    if (m.has_biases()) b.vector(final_norm_name(m, "bias"), c, 0.0);
    if (!m.tie_embeddings) {
      b.matrix("lm_head.weight", {v, c}, 0.02);
    } else if (!spec.has_embedding) {
      b.matrix(embedding_tensor_name(m), {v, c}, 0.02);  // the head's copy of the tied table
    }
  }
  return b.take();
}

std::size_t NamedTensor::full_numel() const {
  std::size_t n = 1;
  for (auto d : full_shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::size_t layout_size(const std::vector<NamedTensor>& tensors) {
  if (tensors.empty()) return 0;
  const NamedTensor& last = tensors.back();
  return aligned(last.offset + last.numel);
}

const NamedTensor& find_tensor(const std::vector<NamedTensor>& tensors, std::string_view name) {
  for (const auto& t : tensors) {
    if (t.name == name) return t;
  }
  throw Error("this stage holds no parameter tensor named '" + std::string(name) + "'");
}

}  // namespace plait::model
