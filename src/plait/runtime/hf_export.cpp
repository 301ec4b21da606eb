#include "plait/runtime/hf_export.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include "plait/checkpoint/hf_weight_files.h"
#include "plait/checkpoint/safetensors_file.h"
#include "plait/core/atomic_file.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/progress.h"
#include "plait/data/hf_tokenizer_files.h"
#include "plait/model/hf_tensor_names.h"
#include "plait/model/parameter_layout.h"
#include "plait/runtime/train_config.h"
#include "plait/spec/hf_model_config.h"
#include "plait/spec/model_spec_json.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

std::string manifest_of(const checkpoint::CheckpointReader& reader) {
  return (fs::path(reader.dir()) / "manifest.json").string();
}

// The largest magnitude a 16-bit type keeps finite after rounding: fp16's 65504 rounds from
// below 65520; bfloat16's largest finite value is (2 - 2^-7) * 2^127 and rounds from below
// (2 - 2^-8) * 2^127.
bool fits(float x, checkpoint::StoredType type) {
  switch (type) {
    case checkpoint::StoredType::f16: return std::fabs(x) < 65520.0f;
    case checkpoint::StoredType::bf16: return std::fabs(x) < 0x1.FFp127f;
    case checkpoint::StoredType::f32: break;
  }
  return true;
}

// A directory the export may fill: new, or existing and empty.
Directory output_directory(const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) throw InputError(out, "(--out)", "is a file; export writes a directory");
    if (!fs::is_empty(out, ec)) {
      throw InputError(out, "(--out)", "is not empty; export writes into a new or empty directory (nothing was replaced)");
    }
  }
  return Directory::create(out, "--out");
}

}  // namespace

const char* torch_dtype_name(checkpoint::StoredType type) {
  switch (type) {
    case checkpoint::StoredType::f16: return "float16";
    case checkpoint::StoredType::bf16: return "bfloat16";
    case checkpoint::StoredType::f32: break;
  }
  return "float32";
}

spec::ModelSpec checkpoint_model(const checkpoint::CheckpointReader& reader) {
  const std::string manifest = manifest_of(reader);
  const JsonFields config(reader.manifest().config, manifest, "config");
  return spec::read_model_spec(config.object("model"));
}

std::string checkpoint_tokenizer(const checkpoint::CheckpointReader& reader) {
  const nlohmann::json& config = reader.manifest().config;
  if (!config.contains("data")) return "byte";  // the default data: byte-level text
  const JsonFields data(config.at("data"), manifest_of(reader), "config.data");
  return data.string("tokenizer", "byte");
}

HfExportResult export_hf(const checkpoint::CheckpointReader& reader, const std::string& out,
                         const HfExportOptions& options) {
  HfExportResult r;
  r.model = checkpoint_model(reader);
  r.tokenizer = checkpoint_tokenizer(reader);
  const spec::ModelSpec& m = r.model;
  const std::vector<model::NamedTensor> layout = model::parameter_layout(m, model::StageSpec::whole_model(m));
  // Every tensor is checked to be in the checkpoint with plait's shape before anything is written.
  std::vector<checkpoint::TensorLayout> stored;
  std::vector<model::HfTensor> hf;
  for (const model::NamedTensor& t : layout) {
    if (!reader.has(t.name)) {
      throw InputError(reader.dir(), "tensor \"" + t.name + "\"", "missing; the checkpoint's model needs it");
    }
    if (reader.shape(t.name) != t.shape) {
      throw InputError(reader.dir(), "tensor \"" + t.name + "\"", "has another shape than the checkpoint's model gives it");
    }
    hf.push_back(model::hf_tensor(m, t));
    stored.push_back({hf.back().name, hf.back().shape, options.dtype});
  }
  const bool gpt2_tokens = r.tokenizer == "gpt2";
  if (gpt2_tokens && options.gpt2_vocab_dir.empty()) {
    throw Error("the checkpoint's run used GPT-2's tokenizer: --vocab-dir must name the directory with encoder.json and vocab.bpe");
  }
  const Directory dir = output_directory(out);
  // The tokenizer first (its files are checked as they are read), config.json last: a directory
  // an interrupted export leaves has no config.json, so nothing loads it as a model.
  r.files = gpt2_tokens ? data::write_hf_gpt2_tokenizer(dir, options.gpt2_vocab_dir, m.max_seq)
                        : data::write_hf_byte_tokenizer(dir, m.max_seq);
  std::vector<float> plait_layout;
  const checkpoint::WrittenFile weights = checkpoint::write_safetensors(
      dir, checkpoint::kHfWeightsFile, stored,
      [&](std::size_t i, std::span<float> values) {
        const model::NamedTensor& t = layout[i];
        note_progress("export: " + t.name);
        if (!hf[i].transposed) {
          reader.read(t.name, values);
        } else {
          plait_layout.resize(t.numel);
          reader.read(t.name, plait_layout);
          model::transpose(plait_layout, t.shape[0], t.shape[1], values);
        }
        for (std::size_t k = 0; k < values.size(); ++k) {
          if (!fits(values[k], options.dtype)) {
            throw InputError(reader.dir(), "tensor \"" + t.name + "\"",
                             "element " + std::to_string(k) + " (" + std::to_string(values[k]) + ") is beyond the range of " +
                                 torch_dtype_name(options.dtype) + "; export it as fp32");
          }
        }
      },
      {{"format", "pt"}});
  r.files.push_back(checkpoint::kHfWeightsFile);
  r.tensors = stored.size();
  r.weight_bytes = weights.bytes;
  const int end_of_text = gpt2_tokens ? kGpt2VocabSize - 1 : -1;
  {
    AtomicFile f(dir, "config.json", AtomicFile::Replace::kNever);
    f.write(spec::hf_model_config_json(m, torch_dtype_name(options.dtype), end_of_text).dump(2) + "\n");
    f.commit();
  }
  r.files.push_back("config.json");
  return r;
}

}  // namespace plait::runtime
