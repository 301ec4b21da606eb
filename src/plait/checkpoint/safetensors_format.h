#pragma once
// The safetensors format (huggingface/safetensors, README "Format"): an 8-byte little-endian
// unsigned header length N, N bytes of UTF-8 JSON starting with '{' (trailing spaces allowed)
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" object of string values, then the byte buffer. Offsets are relative to the
// buffer; the tensors must cover it exactly (no holes, no overlap); duplicate names are
// forbidden. plait stores fp32 only, so dtype must be "F32", and the writer pads the header with
// spaces so the buffer starts at a multiple of 8 bytes (as the reference writer does).
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace plait::checkpoint {

constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;  // the reference reader's limit

struct SafetensorsEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the buffer
  std::uint64_t end = 0;
  std::uint64_t elements() const { return (end - begin) / sizeof(float); }
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // in buffer order
  std::map<std::string, std::string> metadata;
  std::uint64_t buffer_start = 0;  // = 8 + N
};

// The header length N from the first 8 bytes, checked against the file size.
std::uint64_t parse_safetensors_header_length(std::span<const std::byte> first8,
                                              std::uint64_t file_size, const std::string& file);

// Parses and validates the N header bytes (those after the first 8) of a file of file_size
// bytes. Every error is an InputError naming the file, the tensor or field, and the expected
// value.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> header_json,
                                           std::uint64_t file_size, const std::string& file);

// The full header region (8-byte length + padded JSON) for tensors of these names and shapes,
// laid out back to back in the given order.
struct TensorLayout {
  std::string name;
  std::vector<std::int64_t> shape;
};
std::string make_safetensors_header(std::span<const TensorLayout> tensors,
                                    const std::map<std::string, std::string>& metadata);

}  // namespace plait::checkpoint
