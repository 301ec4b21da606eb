#pragma once
// `plait export hf`: a plait checkpoint as a Hugging Face model directory that transformers'
// from_pretrained loads (docs/checkpoints.md, "Hugging Face"):
//   config.json         spec::hf_model_config_json of the checkpoint's model
//   model.safetensors   the parameters (no optimizer state) under Hugging Face's names
//                       (model/hf_tensor_names.h: GPT-2 in Conv1D's transposed layout), as
//                       F32, BF16 or F16, with __metadata__ {"format": "pt"} (transformers
//                       refuses safetensors files without it)
//   tokenizer files     data/hf_tokenizer_files.h: GPT-2's BPE when the run's data used it,
//                       the byte-level tokenizer's tokenizer.json when it used bytes
// The output directory must be new or empty; every file is written atomically, tensor by
// tensor (one tensor in memory at a time).
#include <cstdint>
#include <string>
#include <vector>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/checkpoint/safetensors_format.h"
#include "plait/spec/model_spec.h"

namespace plait::runtime {

struct HfExportOptions {
  checkpoint::StoredType dtype = checkpoint::StoredType::f32;
  // Where GPT-2's encoder.json and vocab.bpe are (runs with data.tokenizer "gpt2").
  std::string gpt2_vocab_dir;
};

struct HfExportResult {
  spec::ModelSpec model;
  std::string tokenizer;              // the run's data.tokenizer
  std::vector<std::string> files;     // names written into the output directory
  std::size_t tensors = 0;
  std::uint64_t weight_bytes = 0;     // of model.safetensors
};

// The model and tokenizer a checkpoint's run used (its manifest's config). InputError naming
// the manifest's field.
spec::ModelSpec checkpoint_model(const checkpoint::CheckpointReader& reader);
std::string checkpoint_tokenizer(const checkpoint::CheckpointReader& reader);

HfExportResult export_hf(const checkpoint::CheckpointReader& reader, const std::string& out,
                         const HfExportOptions& options);

// "float32", "bfloat16", "float16": config.json's torch_dtype.
const char* torch_dtype_name(checkpoint::StoredType type);

}  // namespace plait::runtime
