#pragma once
// A Hugging Face model directory as the start of a plait run (fine-tuning; docs/checkpoints.md,
// "Hugging Face"): config.json read as plait's model (spec/hf_model_config.h) and the weights
// (checkpoint/hf_weight_files.h: model.safetensors or the shards of
// model.safetensors.index.json; F32, F16 or BF16, converted to fp32) served under plait's
// tensor names and layouts (model/hf_tensor_names.h: GPT-2's Conv1D weights transposed).
//
// Opening checks everything before any weight is read: every tensor the model needs is there
// with the shape config.json implies (an error names the tensor, the shape expected and the
// one found), and the files hold nothing else but the buffers transformers may save
// (hf_buffer_tensor) and, when the head is tied, an lm_head.weight (which transformers ignores
// then, as plait does). GPT-2's names are read with or without the "transformer." prefix
// (GPT2LMHeadModel's state dict has it, GPT2Model's, as on the Hub's "gpt2", does not).
#include <span>
#include <string>

#include "plait/checkpoint/hf_weight_files.h"
#include "plait/model/parameter_layout.h"
#include "plait/spec/model_spec.h"

namespace plait::runtime {

// "<dir>/config.json" as plait's model (InputErrors name the file and the config.json field).
spec::ModelSpec read_hf_model(const std::string& dir);

class HfModel {
 public:
  explicit HfModel(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const spec::ModelSpec& model() const { return model_; }
  const checkpoint::HfWeightFiles& weights() const { return weights_; }
  // Reads plait's tensor `t` (of model::parameter_layout(model(), ...)) in plait's layout, as
  // fp32; InputError naming the file, tensor and element of a value that is not finite.
  void read(const model::NamedTensor& t, std::span<float> out) const;
  // "llama 2 layers, ... from 1 file (BF16)" for the run's header.
  std::string describe() const;

 private:
  std::string stored_name(const model::NamedTensor& t) const;
  std::string dir_;
  spec::ModelSpec model_;
  checkpoint::HfWeightFiles weights_;
  std::string gpt2_prefix_;  // "transformer." or ""
};

// Throws InputError (file `config_file`, field "model.<field>") naming the first field in which
// `wanted` (the run's model section) differs from `hf`, the model of the Hugging Face directory
// `dir` (read_hf_model).
void check_same_model(const spec::ModelSpec& wanted, const spec::ModelSpec& hf, const std::string& dir,
                      const std::string& config_file);

}  // namespace plait::runtime
