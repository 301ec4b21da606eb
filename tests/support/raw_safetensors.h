#pragma once
// Safetensors files written by hand for tests, independently of plait's writer: each tensor's
// dtype string, shape and raw bytes as given, the header as plain JSON (with transformers'
// __metadata__ {"format": "pt"} unless asked not to), so the readers are tested against the
// format and not against themselves.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace plait::test {

struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};

inline std::string raw_safetensors(const std::vector<RawTensor>& tensors, bool with_format = true) {
  nlohmann::json h = nlohmann::json::object();
  if (with_format) h["__metadata__"] = {{"format", "pt"}};
  std::size_t offset = 0;
  std::string buffer;
  for (const RawTensor& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
    buffer += t.bytes;
  }
  const std::string json = h.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return out + json + buffer;
}

}  // namespace plait::test
