#pragma once
// The weights of a Hugging Face model directory (transformers' save_pretrained layout), read by
// tensor name whatever file holds them:
//
//   <dir>/model.safetensors                      one file of every tensor, or
//   <dir>/model.safetensors.index.json           {"metadata": {"total_size": N, ...},
//                                                 "weight_map": {"<tensor>": "<file>", ...}}
//   <dir>/model-00001-of-00002.safetensors ...   the shards it names (any plain names)
//
// Tensors may be stored as F32, F16 or BF16 (safetensors_format.h) and are read as fp32. The
// directory is the user's (a Hugging Face cache snapshot links its files to blobs elsewhere), so
// links are followed. This module knows file formats, not models: which names a model needs and
// what they mean is runtime/hf_import.h's.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plait/checkpoint/safetensors_file.h"

namespace plait::checkpoint {

// The name of the single weights file and of the shards' index.
inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightsIndex = "model.safetensors.index.json";

class HfWeightFiles {
 public:
  // Opens and validates every file: the index (strict: an object with "weight_map" of plain
  // file names and an optional "metadata" object), each shard's header, and that the index
  // lists exactly the tensors the shards hold, each in the file it names. A directory with
  // neither file is an InputError saying what plait reads (and that pytorch_model.bin is not).
  explicit HfWeightFiles(const std::string& dir);
  ~HfWeightFiles();
  HfWeightFiles(HfWeightFiles&&) noexcept;
  HfWeightFiles& operator=(HfWeightFiles&&) noexcept;

  const std::string& dir() const { return dir_; }
  // Every tensor, sorted by name.
  std::vector<std::string> tensor_names() const;
  bool has(const std::string& name) const { return where_.contains(name); }
  // The tensor's header entry (shape, dtype); InputError naming the directory when absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The path of the file holding it (for messages).
  const std::string& file_of(const std::string& name) const;
  // Reads the tensor as fp32 into out (size must match its element count).
  void read(const std::string& name, std::span<float> out) const;
  // How many files the weights are spread over (1 without an index).
  std::size_t file_count() const { return files_.size(); }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, std::size_t> where_;  // tensor -> index into files_
};

}  // namespace plait::checkpoint
