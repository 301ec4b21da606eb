#include "plait/checkpoint/hf_weight_files.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"

namespace plait::checkpoint {
namespace fs = std::filesystem;

HfWeightFiles::HfWeightFiles(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dir, "(directory)", fs::exists(dir, ec) ? "not a directory; expected a Hugging Face model directory"
                                                             : "does not exist");
  }
  const fs::path index_path = fs::path(dir) / kHfWeightsIndex;
  const fs::path single_path = fs::path(dir) / kHfWeightsFile;
  if (fs::exists(index_path, ec)) {
    const std::string index_file = index_path.string();
    const nlohmann::json index = read_json_file(index_file);
    if (!index.is_object()) throw InputError(index_file, "(top level)", "expected an object with \"weight_map\"");
    const JsonFields top(index, index_file);
    // metadata (total_size, ...) says nothing the files' own headers do not.
    if (top.has("metadata")) top.object("metadata");
    const nlohmann::json& map = top.raw("weight_map");
    if (!map.is_object()) top.fail("weight_map", "expected an object of tensor name -> file name");
    if (map.empty()) top.fail("weight_map", "lists no tensor");
    std::map<std::string, std::size_t> file_index;  // file name -> index into files_
    std::map<std::string, std::string> listed;       // tensor -> file name
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string field = "weight_map." + it.key();
      if (!it.value().is_string()) {
        throw InputError(index_file, field, "expected a file name, found " + it.value().dump());
      }
      const std::string file = it.value().get<std::string>();
      if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
        throw InputError(index_file, field,
                         "expected a plain file name inside the directory, found \"" + printable_text(file, 60) + "\"");
      }
      if (!file_index.contains(file)) {
        file_index.emplace(file, files_.size());
        files_.push_back(std::make_unique<SafetensorsReader>((fs::path(dir) / file).string(), AcceptedTypes::floats));
      }
      listed.emplace(it.key(), file);
    }
    top.check_no_unknown_fields();
    for (const auto& [file, i] : file_index) {
      for (const SafetensorsEntry& e : files_[i]->header().tensors) {
        auto l = listed.find(e.name);
        if (l == listed.end()) {
          throw InputError(files_[i]->path(), "tensor \"" + e.name + "\"",
                           "not listed in " + std::string(kHfWeightsIndex) + "'s weight_map");
        }
        if (l->second != file) {
          throw InputError(files_[i]->path(), "tensor \"" + e.name + "\"",
                           std::string(kHfWeightsIndex) + " says it is in " + l->second + ", not here");
        }
        where_.emplace(e.name, i);
      }
    }
    for (const auto& [name, file] : listed) {
      if (!where_.contains(name)) {
        throw InputError(index_file, "weight_map." + name, "the tensor is not in " + file);
      }
    }
    return;
  }
  if (!fs::exists(single_path, ec)) {
    throw InputError(dir, "(weights)",
                     std::string("neither ") + kHfWeightsFile + " nor " + kHfWeightsIndex +
                         " is here; plait reads safetensors weights (a pytorch_model.bin is not read: "
                         "save the model with safe_serialization=True)");
  }
  files_.push_back(std::make_unique<SafetensorsReader>(single_path.string(), AcceptedTypes::floats));
  for (const SafetensorsEntry& e : files_[0]->header().tensors) where_.emplace(e.name, 0);
}

HfWeightFiles::~HfWeightFiles() = default;
HfWeightFiles::HfWeightFiles(HfWeightFiles&&) noexcept = default;
HfWeightFiles& HfWeightFiles::operator=(HfWeightFiles&&) noexcept = default;

std::vector<std::string> HfWeightFiles::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : where_) names.push_back(name);
  return names;
}

const SafetensorsEntry& HfWeightFiles::entry(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw InputError(dir_, "tensor \"" + name + "\"", "not in the model's weights");
  return *files_[it->second]->find(name);
}

const std::string& HfWeightFiles::file_of(const std::string& name) const {
  entry(name);
  return files_[where_.at(name)]->path();
}

void HfWeightFiles::read(const std::string& name, std::span<float> out) const {
  entry(name);
  files_[where_.at(name)]->read(name, out);
}

}  // namespace plait::checkpoint
