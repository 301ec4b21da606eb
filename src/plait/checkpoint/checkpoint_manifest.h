#pragma once
// A checkpoint's manifest (manifest.json in the checkpoint's directory): what was saved and how
// to check it. config, data_position, rng_state and optimizer are opaque JSON values owned by
// the runtime (this module knows nothing of models); files lists each tensor file with its size,
// CRC-32C and the global tensor names it holds.
//
//   {"format": "plait-checkpoint", "version": 1, "step": 100,
//    "config": {...}, "data_position": {...}, "rng_state": {...}, "optimizer": {...},
//    "working_directory": "/home/me/run",
//    "files": [{"path": "stage_0.safetensors", "bytes": 123, "crc32c": "0x1a2b3c4d",
//               "tensors": ["wte", "h.0.attn.c_attn.weight", ...]}, ...]}
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace plait::checkpoint {

struct ManifestFile {
  std::string path;  // a plain file name inside the checkpoint directory
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;
  std::vector<std::string> tensors;
};

struct CheckpointManifest {
  std::int64_t step = 0;
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json data_position = nlohmann::json::object();
  nlohmann::json rng_state = nlohmann::json::object();
  nlohmann::json optimizer = nlohmann::json::object();  // optional in the file (default {})
  // The absolute working directory of the run that wrote it, against which the config's
  // relative paths resolve (optional in the file: "" for checkpoints that do not record it).
  std::string working_directory;
  std::vector<ManifestFile> files;
};

std::string manifest_to_text(const CheckpointManifest& m);

// Strict: unknown fields, wrong types, file names with '/' or "..", malformed checksums and a
// tensor listed twice (in one file or across files) are InputErrors naming `file` and the field.
CheckpointManifest parse_manifest(std::string_view text, const std::string& file);

}  // namespace plait::checkpoint
