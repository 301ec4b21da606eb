#include "plait/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/core/progress.h"
#include "plait/data/little_endian.h"

namespace plait::data {
namespace fs = std::filesystem;
namespace {

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::int64_t parse_shard_header(std::span<const std::byte> header, std::uint64_t file_size,
                                const std::string& file) {
  if (file_size < kShardHeaderBytes || header.size() < kShardHeaderBytes) {
    throw InputError(file, "offset 0 (header)",
                     "expected a 1024-byte header of 256 int32, but the file has " +
                         std::to_string(file_size) + " bytes");
  }
  const std::int32_t magic = read_le_int32(header, 0);
  if (magic != kShardMagic) {
    throw InputError(file, "offset 0 (magic)",
                     "expected 20240520 (an llm.c token shard), found " + std::to_string(magic));
  }
  const std::int32_t version = read_le_int32(header, 4);
  if (version != kShardVersion) {
    throw InputError(file, "offset 4 (version)",
                     "expected 1 (uint16 tokens), found " + std::to_string(version) +
                         (version == 2 ? " (llm.c's uint32-token format, not supported)" : ""));
  }
  const std::int32_t count = read_le_int32(header, 8);
  if (count < 0) {
    throw InputError(file, "offset 8 (token count)",
                     "expected a count >= 0, found " + std::to_string(count));
  }
  const std::uint64_t expected = kShardHeaderBytes + 2 * static_cast<std::uint64_t>(count);
  if (file_size != expected) {
    throw InputError(file, "offset 8 (token count)",
                     "the header says " + std::to_string(count) +
                         " tokens, so the file should have 1024 + 2 x " + std::to_string(count) +
                         " = " + std::to_string(expected) + " bytes, found " +
                         std::to_string(file_size));
  }
  return count;
}

void fill_shard_header(std::int64_t tokens, std::span<std::byte, kShardHeaderBytes> header) {
  if (tokens < 0 || tokens > kMaxShardTokens) {
    throw Error("token shard: " + std::to_string(tokens) +
                " tokens do not fit one shard (at most 2147483647)");
  }
  std::fill(header.begin(), header.end(), std::byte{0});
  write_le_int32(header, 0, kShardMagic);
  write_le_int32(header, 4, kShardVersion);
  write_le_int32(header, 8, static_cast<std::int32_t>(tokens));
}

namespace {
constexpr std::size_t kWriteBlock = std::size_t{1} << 20;
}  // namespace

TokenShardWriter::TokenShardWriter(const Directory& dir, const std::string& name, AtomicFile::Replace replace)
    : file_(dir, name, replace) {
  buffer_.reserve(kWriteBlock);
  std::byte header[kShardHeaderBytes];
  fill_shard_header(0, header);  // the count comes at the end
  file_.write(std::span<const std::byte>(header));
}

void TokenShardWriter::add(std::span<const std::uint16_t> tokens) {
  if (count_ + static_cast<std::int64_t>(tokens.size()) > kMaxShardTokens) {
    throw Error("token shard: " + file_.path() + ": more than 2147483647 tokens do not fit one shard");
  }
  for (const std::uint16_t t : tokens) {
    if (buffer_.size() + 2 > kWriteBlock) flush();
    buffer_.push_back(static_cast<std::byte>(t & 0xFF));  // little-endian
    buffer_.push_back(static_cast<std::byte>(t >> 8));
  }
  count_ += static_cast<std::int64_t>(tokens.size());
}

void TokenShardWriter::flush() {
  file_.write(buffer_);
  buffer_.clear();
}

std::uint32_t TokenShardWriter::commit() {
  flush();
  std::byte header[kShardHeaderBytes];
  fill_shard_header(count_, header);
  file_.write_at(0, header);
  const std::uint32_t crc = file_.checksum_contents();
  file_.commit();
  return crc;
}

std::uint32_t write_token_shard(const std::string& path, std::span<const std::uint16_t> tokens) {
  const std::string parent = fs::path(path).parent_path().string();
  TokenShardWriter w(Directory::open(parent.empty() ? "." : parent), fs::path(path).filename().string(),
                     AtomicFile::Replace::kYes);
  w.add(tokens);
  return w.commit();
}

TokenShard::TokenShard(const std::string& path, std::optional<int> vocab_size,
                       const std::optional<ShardChecksum>& checksum)
    : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path, "(file)", system_error("cannot open the shard"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path, "(file)", "not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::byte header[kShardHeaderBytes] = {};
  const ssize_t got = ::pread(fd, header, kShardHeaderBytes, 0);
  if (got < 0) {
    const std::string msg = system_error("cannot read the header");
    ::close(fd);
    throw InputError(path, "(file)", msg);
  }
  std::int64_t count = 0;
  try {
    count = parse_shard_header(std::span<const std::byte>(header, static_cast<std::size_t>(got)),
                               size, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  map_bytes_ = static_cast<std::size_t>(size);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw InputError(path, "(file)", system_error("cannot map the shard"));
  }
  tokens_ = reinterpret_cast<const std::uint16_t*>(static_cast<const std::byte*>(map_) +
                                                   kShardHeaderBytes);
  count_ = static_cast<std::size_t>(count);
  static_assert(std::endian::native == std::endian::little,
                "shards are little-endian and mapped as they are");
  const auto fail = [this](const std::string& where, const std::string& problem) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw InputError(path_, where, problem);
  };
  if (checksum) {
    // In 16 MiB blocks, each a mark of progress for the stall watchdog (a large shard takes a
    // while to read on a slow disk).
    constexpr std::size_t kBlock = std::size_t{16} << 20;
    const auto* bytes = static_cast<const std::byte*>(map_);
    std::uint32_t crc = 0;
    for (std::size_t at = 0; at < map_bytes_; at += kBlock) {
      crc = crc32c(std::span(bytes + at, std::min(kBlock, map_bytes_ - at)), crc);
      note_progress();
    }
    if (crc != checksum->crc32c) {
      fail("(checksum)", checksum->recorded_in + " records CRC-32C " + crc32c_text(checksum->crc32c) + ", the file's is " +
                             crc32c_text(crc) + "; the shard is corrupted (or was changed since it was prepared)");
    }
  }
  for (std::size_t i = 0; i < count_; ++i) max_token_ = std::max(max_token_, tokens_[i]);
  if (vocab_size) {
    for (std::size_t i = 0; i < count_; ++i) {
      if (tokens_[i] >= *vocab_size) {
        const std::string where = "offset " + std::to_string(kShardHeaderBytes + 2 * i) +
                                  " (token " + std::to_string(i) + ")";
        fail(where, "expected a token id below the vocabulary size " + std::to_string(*vocab_size) + ", found " +
                        std::to_string(tokens_[i]));
      }
    }
  }
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      max_token_(std::exchange(other.max_token_, 0)) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, map_bytes_);
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    count_ = std::exchange(other.count_, 0);
    max_token_ = std::exchange(other.max_token_, 0);
  }
  return *this;
}

}  // namespace plait::data
