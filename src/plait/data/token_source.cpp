#include "plait/data/token_source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "plait/core/error.h"
#include "plait/core/progress.h"

namespace plait::data {
namespace fs = std::filesystem;

TokenSpanSource::TokenSpanSource(std::span<const std::uint16_t> tokens, std::string name)
    : tokens_(tokens), name_(std::move(name)) {}

void TokenSpanSource::read(std::int64_t begin, std::span<std::uint16_t> out) const {
  if (!out.empty()) std::memcpy(out.data(), tokens_.data() + begin, out.size_bytes());
}

std::string TokenSpanSource::describe() const {
  return name_ + " (" + std::to_string(tokens_.size()) + " tokens)";
}

namespace {

std::vector<ShardSetSource::File> unchecked(const std::vector<std::string>& files) {
  std::vector<ShardSetSource::File> out;
  for (const std::string& f : files) out.push_back({f, std::nullopt, std::nullopt});
  return out;
}

}  // namespace

ShardSetSource::ShardSetSource(const std::vector<std::string>& files, std::optional<int> vocab_size)
    : ShardSetSource(unchecked(files), vocab_size) {}

ShardSetSource::ShardSetSource(const std::vector<File>& files, std::optional<int> vocab_size) {
  if (files.empty()) throw Error("token shards: no shard files given");
  starts_.push_back(0);
  for (const File& f : files) {
    note_progress("reading token shard " + f.path);
    shards_.emplace_back(f.path, vocab_size, f.checksum);
    starts_.push_back(starts_.back() + static_cast<std::int64_t>(shards_.back().tokens().size()));
  }
}

std::uint16_t ShardSetSource::max_token() const {
  std::uint16_t m = 0;
  for (const TokenShard& s : shards_) m = std::max(m, s.max_token());
  return m;
}

void ShardSetSource::read(std::int64_t begin, std::span<std::uint16_t> out) const {
  // The last shard starting at or before `begin`, then onward across shard ends.
  std::size_t i = static_cast<std::size_t>(
      std::upper_bound(starts_.begin(), starts_.end() - 1, begin) - starts_.begin() - 1);
  std::size_t done = 0;
  while (done < out.size()) {
    const auto tokens = shards_[i].tokens();
    const auto offset = static_cast<std::size_t>(begin + static_cast<std::int64_t>(done) - starts_[i]);
    const std::size_t n = std::min(out.size() - done, tokens.size() - offset);
    std::memcpy(out.data() + done, tokens.data() + offset, n * sizeof(std::uint16_t));
    done += n;
    ++i;
  }
}

std::string ShardSetSource::describe() const {
  return std::to_string(shards_.size()) + " shard(s) from " + shards_.front().path() + " (" +
         std::to_string(size()) + " tokens)";
}

std::vector<std::string> find_token_shards(const std::string& path, const std::string& split) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  if (!fs::is_directory(path, ec)) throw InputError(path, "(file)", "no such file or directory");
  std::vector<std::string> files;
  const std::string infix = "_" + split + "_";
  const std::string suffix = "_" + split + ".bin";
  for (const auto& e : fs::directory_iterator(path)) {
    const std::string name = e.path().filename().string();
    const bool bin = name.size() > 4 && name.ends_with(".bin");
    if (e.is_regular_file() && bin &&
        (name.find(infix) != std::string::npos || name.ends_with(suffix))) {
      files.push_back(e.path().string());
    }
  }
  if (files.empty()) {
    throw InputError(path, "(directory)",
                     "no " + split + " shards (files named *" + infix + "*.bin or *" + suffix +
                         ")");
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace plait::data
