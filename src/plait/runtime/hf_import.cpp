#include "plait/runtime/hf_import.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/model/engine_limits.h"
#include "plait/model/hf_tensor_names.h"
#include "plait/spec/hf_model_config.h"
#include "plait/spec/model_spec_json.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

std::string config_path(const std::string& dir) { return (fs::path(dir) / "config.json").string(); }

}  // namespace

spec::ModelSpec read_hf_model(const std::string& dir) {
  const std::string file = config_path(dir);
  const spec::ModelSpec m = spec::read_hf_model_config(read_json_file(file), file);
  model::check_engine_limits(m, file);
  return m;
}

HfModel::HfModel(const std::string& dir) : dir_(dir), model_(read_hf_model(dir)), weights_(dir) {
  if (model_.family == spec::Family::gpt2) {
    gpt2_prefix_ = weights_.has("transformer.wte.weight") || !weights_.has("wte.weight") ? "transformer." : "";
  }
  const std::vector<model::NamedTensor> layout =
      model::parameter_layout(model_, model::StageSpec::whole_model(model_));
  std::set<std::string> expected;
  for (const model::NamedTensor& t : layout) {
    const model::HfTensor hf = model::hf_tensor(model_, t);
    const std::string name = stored_name(t);
    expected.insert(name);
    if (!weights_.has(name)) {
      const bool head = name == "lm_head.weight";
      throw InputError(dir_, "tensor \"" + name + "\"",
                       std::string("missing from the weights") +
                           (head ? " (config.json's tie_word_embeddings is false: the head has its own matrix)"
                                 : ", which config.json's model needs"));
    }
    const checkpoint::SafetensorsEntry& e = weights_.entry(name);
    if (e.shape != hf.shape) {
      throw InputError(weights_.file_of(name), "tensor \"" + name + "\"",
                       "expected shape " + checkpoint::shape_text(hf.shape) + " (from config.json), found " + checkpoint::shape_text(e.shape));
    }
  }
  for (const std::string& name : weights_.tensor_names()) {
    if (expected.contains(name)) continue;
    std::string bare = name;
    if (!gpt2_prefix_.empty() && bare.starts_with(gpt2_prefix_)) bare = bare.substr(gpt2_prefix_.size());
    if (model::hf_buffer_tensor(model_, bare)) continue;
    // A tied head's matrix is the embedding; transformers ignores a saved copy, and so does plait.
    if (name == "lm_head.weight" && model_.tie_embeddings) continue;
    throw InputError(weights_.file_of(name), "tensor \"" + name + "\"",
                     std::string("not a tensor of ") + spec::hf_architecture(model_.family) +
                         " as plait implements it (a config.json field plait does not know of may have asked for it)");
  }
}

std::string HfModel::stored_name(const model::NamedTensor& t) const {
  std::string name = model::hf_tensor(model_, t).name;
  if (model_.family == spec::Family::gpt2 && gpt2_prefix_.empty() && name.starts_with("transformer.")) {
    name = name.substr(std::string("transformer.").size());
  }
  return name;
}

void HfModel::read(const model::NamedTensor& t, std::span<float> out) const {
  const model::HfTensor hf = model::hf_tensor(model_, t);
  const std::string name = stored_name(t);
  if (out.size() != t.numel) throw Error("HfModel::read: " + t.name + " needs room for " + std::to_string(t.numel) + " values");
  if (hf.transposed) {
    std::vector<float> stored(t.numel);
    weights_.read(name, stored);
    model::transpose(stored, hf.shape[0], hf.shape[1], out);
  } else {
    weights_.read(name, out);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      throw InputError(weights_.file_of(name), "tensor \"" + name + "\"",
                       "element " + std::to_string(i) + " is " + (std::isnan(out[i]) ? "NaN" : "infinite") +
                           "; a model to train from holds finite values only");
    }
  }
}

std::string HfModel::describe() const {
  std::set<std::string> types;
  for (const std::string& name : weights_.tensor_names()) {
    types.insert(std::string(checkpoint::stored_type_name(weights_.entry(name).dtype)));
  }
  std::string t;
  for (const std::string& s : types) t += (t.empty() ? "" : ", ") + s;
  return spec::describe(model_) + ", " + std::to_string(weights_.file_count()) + " weight file(s) of " + t +
         (types.size() == 1 && *types.begin() == "F32" ? "" : " converted to fp32");
}

void check_same_model(const spec::ModelSpec& wanted, const spec::ModelSpec& hf, const std::string& dir,
                      const std::string& config_file) {
  const nlohmann::json want = spec::model_spec_json(wanted), have = spec::model_spec_json(hf);
  for (auto it = have.begin(); it != have.end(); ++it) {
    if (!want.contains(it.key()) || want.at(it.key()) != it.value()) {
      throw InputError(config_file, "model." + it.key(),
                       (want.contains(it.key()) ? want.at(it.key()).dump() : std::string("(none)")) + ", but " +
                           config_path(dir) + " (init.from) says " + it.value().dump() +
                           "; leave the model section out to take the Hugging Face model's");
    }
  }
}

}  // namespace plait::runtime
