#pragma once
// The safetensors format (huggingface/safetensors, README "Format"): an 8-byte little-endian
// unsigned header length N, N bytes of UTF-8 JSON starting with '{' (trailing spaces allowed)
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" object of string values, then the byte buffer. Offsets are relative to the
// buffer; the tensors must cover it exactly (no holes, no overlap); duplicate names are
// forbidden. plait's checkpoints store fp32 only, so their dtype must be "F32"; Hugging Face
// model files (runtime/hf_import.h) may also hold "F16" and "BF16", which the reader converts to
// fp32 exactly and the exporter writes. The writer pads the header with spaces so the buffer
// starts at a multiple of 8 bytes (as the reference writer does).
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace plait::checkpoint {

// The element types a safetensors file may hold that plait reads: fp32, IEEE fp16, bfloat16.
enum class StoredType : std::uint8_t { f32, f16, bf16 };
// "F32", "F16", "BF16": the header's spelling.
std::string_view stored_type_name(StoredType type);
constexpr std::size_t stored_type_size(StoredType type) { return type == StoredType::f32 ? 4 : 2; }

// Which dtypes a reader accepts: plait's own checkpoints are fp32 only; a Hugging Face model
// directory's files may hold any of the three.
enum class AcceptedTypes : std::uint8_t { f32_only, floats };

constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;  // the reference reader's limit

struct SafetensorsEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the buffer
  std::uint64_t end = 0;
  StoredType dtype = StoredType::f32;
  std::uint64_t elements() const { return (end - begin) / stored_type_size(dtype); }
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
// A dtype other than F32 is refused unless `accept` is AcceptedTypes::floats (then F16 and
// BF16 are read too; any other dtype, such as I64 or F64, is still refused naming it).
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> header_json,
                                           std::uint64_t file_size, const std::string& file,
                                           AcceptedTypes accept = AcceptedTypes::f32_only);

// The full header region (8-byte length + padded JSON) for tensors of these names and shapes,
// laid out back to back in the given order.
struct TensorLayout {
  std::string name;
  std::vector<std::int64_t> shape;
  StoredType dtype = StoredType::f32;
};
// "[2, 3]" for messages.
std::string shape_text(const std::vector<std::int64_t>& shape);

std::string make_safetensors_header(std::span<const TensorLayout> tensors,
                                    const std::map<std::string, std::string>& metadata);

}  // namespace plait::checkpoint
