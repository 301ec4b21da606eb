#include "plait/checkpoint/safetensors_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "plait/core/bf16.h"
#include "plait/core/error.h"
#include "plait/core/fp16.h"

namespace plait::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors is little-endian; floats are written as they lie in memory");

// pread all of out at offset, or say why not.
void read_exactly(int fd, std::span<std::byte> out, std::uint64_t offset, const std::string& path,
                  const std::string& what) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw InputError(path, what,
                       n == 0 ? "the file ended early" : std::string("read error: ") + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

namespace {

std::string safetensors_header(std::span<const TensorRef> tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<TensorLayout> layout;
  for (const TensorRef& t : tensors) {
    std::int64_t n = 1;
    for (std::int64_t d : t.shape) n *= d;
    if (n < 0 || static_cast<std::uint64_t>(n) != t.data.size()) {
      throw Error("safetensors: tensor \"" + t.name + "\" has " + std::to_string(t.data.size()) +
                  " values, its shape needs " + std::to_string(n));
    }
    layout.push_back({t.name, t.shape, t.stored});
  }
  return make_safetensors_header(layout, metadata);
}

// The 16-bit form of x the file stores.
std::uint16_t narrow(float x, StoredType type) {
  return type == StoredType::bf16 ? bf16::round_bits(x) : float_to_half_bits(x);
}

// Appends values as the file stores them.
void write_values(AtomicFile& f, std::span<const float> values, StoredType stored, std::vector<std::uint16_t>& narrowed) {
  if (stored == StoredType::f32) {
    f.write(std::as_bytes(values));
    return;
  }
  // Converted a block at a time, so a large tensor needs no second copy of itself.
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  for (std::size_t begin = 0; begin < values.size(); begin += kBlock) {
    const std::size_t n = std::min(kBlock, values.size() - begin);
    narrowed.resize(n);
    for (std::size_t i = 0; i < n; ++i) narrowed[i] = narrow(values[begin + i], stored);
    f.write(std::as_bytes(std::span<const std::uint16_t>(narrowed)));
  }
}

WrittenFile write_to(AtomicFile& f, const std::string& header, std::span<const TensorRef> tensors) {
  f.write(header);
  std::vector<std::uint16_t> narrowed;
  for (const TensorRef& t : tensors) write_values(f, t.data, t.stored, narrowed);
  f.commit();
  return {f.path(), f.bytes_written(), f.crc32c()};
}

}  // namespace

WrittenFile write_safetensors(const Directory& dir, const std::string& name, std::span<const TensorRef> tensors,
                              const std::map<std::string, std::string>& metadata, AtomicFile::Replace replace) {
  const std::string header = safetensors_header(tensors, metadata);
  AtomicFile f(dir, name, replace);
  return write_to(f, header, tensors);
}

WrittenFile write_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                              const std::map<std::string, std::string>& metadata) {
  const std::string header = safetensors_header(tensors, metadata);
  AtomicFile f(path);
  return write_to(f, header, tensors);
}

WrittenFile write_safetensors(const Directory& dir, const std::string& name, std::span<const TensorLayout> tensors,
                              const TensorFill& fill, const std::map<std::string, std::string>& metadata,
                              AtomicFile::Replace replace) {
  const std::string header = make_safetensors_header(tensors, metadata);
  AtomicFile f(dir, name, replace);
  f.write(header);
  std::vector<float> values;
  std::vector<std::uint16_t> narrowed;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::size_t n = 1;
    for (std::int64_t d : tensors[i].shape) n *= static_cast<std::size_t>(d);
    values.assign(n, 0.0f);
    fill(i, values);
    write_values(f, values, tensors[i].dtype, narrowed);
  }
  f.commit();
  return {f.path(), f.bytes_written(), f.crc32c()};
}

SafetensorsReader::SafetensorsReader(const std::string& path, AcceptedTypes accept) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(path, "(file)", std::string("cannot open: ") + std::strerror(errno));
  read_header(accept);
}

SafetensorsReader::SafetensorsReader(int fd, std::string path, AcceptedTypes accept)
    : path_(std::move(path)), fd_(fd) {
  read_header(accept);
}

void SafetensorsReader::read_header(AcceptedTypes accept) {
  const std::string& path = path_;
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      throw InputError(path, "(file)", "not a regular file");
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    std::byte first8[8] = {};
    if (size >= 8) read_exactly(fd_, first8, 0, path, "offset 0 (header length)");
    const std::uint64_t n = parse_safetensors_header_length(first8, size, path);
    std::vector<std::byte> json(n);
    read_exactly(fd_, json, 8, path, "offset 8 (header)");
    header_ = parse_safetensors_header(json, size, path, accept);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  for (std::size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      header_(std::move(other.header_)),
      index_(std::move(other.index_)) {}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

void SafetensorsReader::read(const std::string& name, std::span<float> out) const {
  const SafetensorsEntry* e = find(name);
  if (!e) throw InputError(path_, "tensor \"" + name + "\"", "not in the file");
  if (out.size() != e->elements()) {
    throw InputError(path_, "tensor \"" + name + "\"",
                     "holds " + std::to_string(e->elements()) + " values, the destination has room for " +
                         std::to_string(out.size()));
  }
  const std::string what = "tensor \"" + name + "\"";
  if (e->dtype == StoredType::f32) {
    read_exactly(fd_, std::as_writable_bytes(out), header_.buffer_start + e->begin, path_, what);
    return;
  }
  // 16-bit elements: read into the back half of `out` (its bytes suffice for them), then widen
  // front to back: element i's fp32 bytes [4i, 4i + 4) never reach a 16-bit element not yet
  // read, which lie at [2n + 2j, ...) with j >= i.
  const std::size_t n = out.size();
  auto* bytes = reinterpret_cast<std::byte*>(out.data());
  read_exactly(fd_, std::span<std::byte>(bytes + 2 * n, 2 * n), header_.buffer_start + e->begin, path_, what);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h = 0;
    std::memcpy(&h, bytes + 2 * n + 2 * i, sizeof h);
    out[i] = e->dtype == StoredType::bf16 ? static_cast<float>(bf16::from_bits(h)) : half_bits_to_float(h);
  }
}

}  // namespace plait::checkpoint
