#pragma once
// Writing and reading whole safetensors files of tensors that are fp32 in memory (format:
// safetensors_format.h): a file may store them as F32, or rounded to F16 or BF16 (to nearest,
// ties to even), and reading converts what the file stores back to fp32 (exactly).
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "plait/checkpoint/safetensors_format.h"
#include "plait/core/atomic_file.h"
#include "plait/core/directory.h"

namespace plait::checkpoint {

// A tensor to write: its global name, shape and data (row-major, product(shape) floats), and
// the type the file stores it as.
struct TensorRef {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;
  StoredType stored = StoredType::f32;
};

struct WrittenFile {
  std::string path;
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;  // of the whole file
};

// Writes atomically (AtomicFile: a temporary file of a unique name, fsync, rename, fsync of the
// directory) the file `name` inside `dir`, replacing a file of that name or never (`replace`).
// Throws Error if a tensor's data does not match its shape or names repeat.
WrittenFile write_safetensors(const Directory& dir, const std::string& name, std::span<const TensorRef> tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              AtomicFile::Replace replace = AtomicFile::Replace::kYes);
// The same for a file the user names by path (its directory may be a link; the file is replaced).
WrittenFile write_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                              const std::map<std::string, std::string>& metadata = {});

// The same, tensor by tensor: `fill(i, out)` writes tensor i's fp32 values into `out` (its
// element count) just before the file stores them, so that only one tensor is in memory at a
// time (an exported model can be larger than the memory left beside it).
using TensorFill = std::function<void(std::size_t index, std::span<float> out)>;
WrittenFile write_safetensors(const Directory& dir, const std::string& name, std::span<const TensorLayout> tensors,
                              const TensorFill& fill, const std::map<std::string, std::string>& metadata = {},
                              AtomicFile::Replace replace = AtomicFile::Replace::kNever);

// A validated safetensors file; tensors are read on demand with pread.
class SafetensorsReader {
 public:
  // A file the user names (a link is followed). `accept`: which dtypes the header may hold.
  explicit SafetensorsReader(const std::string& path, AcceptedTypes accept = AcceptedTypes::f32_only);
  // The file open at `fd` (opened by Directory::open_file: no link followed), named `path`;
  // takes the descriptor (closed also when the header is refused).
  SafetensorsReader(int fd, std::string path, AcceptedTypes accept = AcceptedTypes::f32_only);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&& other) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) = delete;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const SafetensorsHeader& header() const { return header_; }
  const SafetensorsEntry* find(const std::string& name) const;  // nullptr if absent
  // Copies the tensor into out, whose size must equal its element count, converting F16 and
  // BF16 elements to fp32.
  void read(const std::string& name, std::span<float> out) const;
  const std::string& path() const { return path_; }

 private:
  void read_header(AcceptedTypes accept);
  std::string path_;
  int fd_ = -1;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t> index_;
};

}  // namespace plait::checkpoint
