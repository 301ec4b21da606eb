#pragma once
// llm.c's token shard files (karpathy/llm.c, dev/data/data_common.py write_datafile and
// llmc/dataloader.h): a header of 256 little-endian int32 -- [0] magic 20240520, [1] version 1,
// [2] token count, the rest 0 -- then the tokens as little-endian uint16. A file is valid only
// if its size is exactly 1024 + 2 x count bytes. (Version 2, llm.c's uint32 tokens for Llama 3,
// is refused with a message saying so.)
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plait/core/atomic_file.h"
#include "plait/core/directory.h"

namespace plait::data {

constexpr std::int32_t kShardMagic = 20240520;
constexpr std::int32_t kShardVersion = 1;
constexpr std::size_t kShardHeaderBytes = 256 * sizeof(std::int32_t);
constexpr std::int64_t kMaxShardTokens = 2147483647;  // the count is an int32

// Validates a shard header (the file's first bytes, at least kShardHeaderBytes of them unless
// the file is shorter) against the file's size and returns the token count. Errors are
// InputErrors naming the file, the byte offset of the field and the expected value.
std::int64_t parse_shard_header(std::span<const std::byte> header, std::uint64_t file_size,
                                const std::string& file);

// The 1024-byte header for `tokens` tokens.
void fill_shard_header(std::int64_t tokens, std::span<std::byte, kShardHeaderBytes> header);

// Writes one shard as its tokens arrive: into a temporary file of a unique name beside it
// (core/atomic_file.h: O_EXCL | O_NOFOLLOW), tokens in 1 MiB blocks (memory stays constant
// whatever the shard's size), the header's count written last. commit() checksums the file as
// it lies on disk, fsyncs it and renames it to `name` without replacing anything there; a
// writer destroyed uncommitted (any error) removes its temporary file.
class TokenShardWriter {
 public:
  TokenShardWriter(const Directory& dir, const std::string& name,
                   AtomicFile::Replace replace = AtomicFile::Replace::kNever);
  void add(std::span<const std::uint16_t> tokens);
  std::int64_t tokens() const { return count_; }
  // Returns the whole file's CRC-32C.
  std::uint32_t commit();

 private:
  void flush();
  AtomicFile file_;
  std::vector<std::byte> buffer_;
  std::int64_t count_ = 0;
};

// A whole shard at a path the user names, replacing a file there (a link there is replaced,
// never followed). Returns the file's CRC-32C.
std::uint32_t write_token_shard(const std::string& path, std::span<const std::uint16_t> tokens);

// What a shard must match beyond its own header: the CRC-32C of the whole file recorded in the
// shard manifest beside it (shard_manifest.h), named in the error.
struct ShardChecksum {
  std::uint32_t crc32c = 0;
  std::string recorded_in;
};

// One shard, validated and memory-mapped read-only. With a checksum, the whole file's CRC-32C
// must equal it (checked first: a flipped bit shows as corruption, not as a strange token); with
// vocab_size, every token is checked to be below it (the error names the token's byte offset).
class TokenShard {
 public:
  explicit TokenShard(const std::string& path, std::optional<int> vocab_size = std::nullopt,
                      const std::optional<ShardChecksum>& checksum = std::nullopt);
  ~TokenShard();
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  std::span<const std::uint16_t> tokens() const { return {tokens_, count_}; }
  const std::string& path() const { return path_; }
  // The largest token id (0 when empty), found while checking the vocabulary.
  std::uint16_t max_token() const { return max_token_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const std::uint16_t* tokens_ = nullptr;
  std::size_t count_ = 0;
  std::uint16_t max_token_ = 0;
};

}  // namespace plait::data
