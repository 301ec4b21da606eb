#include "plait/model/parameter_layout.h"

#include "plait/core/error.h"

namespace plait::model {
namespace {

class LayoutBuilder {
 public:
  void add(std::string name, std::vector<std::int64_t> shape) {
    std::size_t numel = 1;
    for (auto d : shape) numel *= static_cast<std::size_t>(d);
    const bool decays = shape.size() >= 2;
    tensors_.push_back({std::move(name), std::move(shape), next_, numel, decays});
    next_ += (numel + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  }
  std::vector<NamedTensor> take() { return std::move(tensors_); }

 private:
  std::vector<NamedTensor> tensors_;
  std::size_t next_ = 0;
};

}  // namespace

std::string layer_tensor_name(int layer, std::string_view suffix) {
  return "h." + std::to_string(layer) + "." + std::string(suffix);
}

std::vector<NamedTensor> parameter_layout(const GPTConfig& config, const StageSpec& spec) {
  validate_stage_spec(config, spec);
  const std::int64_t c = config.hidden, v = config.vocab;
  LayoutBuilder b;
  if (spec.has_embedding) {
    b.add("wte", {v, c});
    b.add("wpe", {config.max_seq, c});
  }
  for (int l = spec.first_layer; l < spec.last_layer; ++l) {
    b.add(layer_tensor_name(l, "ln_1.weight"), {c});
    b.add(layer_tensor_name(l, "ln_1.bias"), {c});
    b.add(layer_tensor_name(l, "attn.c_attn.weight"), {3 * c, c});
    b.add(layer_tensor_name(l, "attn.c_attn.bias"), {3 * c});
    b.add(layer_tensor_name(l, "attn.c_proj.weight"), {c, c});
    b.add(layer_tensor_name(l, "attn.c_proj.bias"), {c});
    b.add(layer_tensor_name(l, "ln_2.weight"), {c});
    b.add(layer_tensor_name(l, "ln_2.bias"), {c});
    b.add(layer_tensor_name(l, "mlp.c_fc.weight"), {4 * c, c});
    b.add(layer_tensor_name(l, "mlp.c_fc.bias"), {4 * c});
    b.add(layer_tensor_name(l, "mlp.c_proj.weight"), {c, 4 * c});
    b.add(layer_tensor_name(l, "mlp.c_proj.bias"), {c});
  }
  if (spec.has_head) {
    b.add("ln_f.weight", {c});
    b.add("ln_f.bias", {c});
    if (!config.tie_embeddings) {
      b.add("lm_head.weight", {v, c});
    } else if (!spec.has_embedding) {
      b.add("wte", {v, c});  // the head's copy of the tied embedding
    }
  }
  return b.take();
}

std::size_t layout_size(const std::vector<NamedTensor>& tensors) {
  if (tensors.empty()) return 0;
  const NamedTensor& last = tensors.back();
  return (last.offset + last.numel + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

const NamedTensor& find_tensor(const std::vector<NamedTensor>& tensors, std::string_view name) {
  for (const auto& t : tensors) {
    if (t.name == name) return t;
  }
  throw Error("this stage holds no parameter tensor named '" + std::string(name) + "'");
}

}  // namespace plait::model
