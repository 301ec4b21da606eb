#pragma once
// A token stream the loaders read from: either tokens in memory (e.g. a text corpus through the
// byte tokenizer) or a set of llm.c shard files read as one stream, in order. The loaders see
// only positions in the stream, so both sources train the same way.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plait/data/document_index.h"
#include "plait/data/token_shard.h"

namespace plait::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::int64_t size() const = 0;
  // Copies tokens [begin, begin + out.size()); requires begin + out.size() <= size().
  virtual void read(std::int64_t begin, std::span<std::uint16_t> out) const = 0;
  // For messages: what the stream is ("3 shards in data/ (12,345 tokens)").
  virtual std::string describe() const = 0;
};

// Tokens in memory (kept by reference: they must outlive the source).
class TokenSpanSource : public TokenSource {
 public:
  explicit TokenSpanSource(std::span<const std::uint16_t> tokens, std::string name = "tokens");
  std::int64_t size() const override { return static_cast<std::int64_t>(tokens_.size()); }
  void read(std::int64_t begin, std::span<std::uint16_t> out) const override;
  std::string describe() const override;

 private:
  std::span<const std::uint16_t> tokens_;
  std::string name_;
};

// Shard files concatenated in the order given, each validated (its checksum against the shard
// manifest's when it has one, its tokens against vocab_size if given) when the source is built.
class ShardSetSource : public TokenSource {
 public:
  struct File {
    std::string path;
    std::optional<ShardChecksum> checksum;
    std::optional<DocumentIndexFile> documents;  // its boundary index, when a manifest records one
  };
  explicit ShardSetSource(const std::vector<std::string>& files,
                          std::optional<int> vocab_size = std::nullopt);
  ShardSetSource(const std::vector<File>& files, std::optional<int> vocab_size);
  std::int64_t size() const override { return starts_.back(); }
  void read(std::int64_t begin, std::span<std::uint16_t> out) const override;
  std::string describe() const override;
  const std::vector<TokenShard>& shards() const { return shards_; }
  // The largest token id in the stream.
  std::uint16_t max_token() const;

 private:
  std::vector<TokenShard> shards_;
  std::vector<std::int64_t> starts_;  // starts_[i]: stream position of shard i; back() = size
};

// The shards of one split: `path` is a shard file, or a directory whose files named
// "*_<split>_*.bin" or "*_<split>.bin" (llm.c's naming) are taken in name order. Throws
// InputError if none are found.
std::vector<std::string> find_token_shards(const std::string& path, const std::string& split);

}  // namespace plait::data
