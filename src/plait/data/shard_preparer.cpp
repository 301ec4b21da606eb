#include "plait/data/shard_preparer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "plait/core/error.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/input_files.h"
#include "plait/data/shard_manifest.h"
#include "plait/data/token_shard.h"

namespace plait::data {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kBlockBytes = 1 << 20;
constexpr std::size_t kBinarySniffBytes = 8000;  // git's buffer_is_binary() looks this far

// Collects one split's tokens and writes a shard each time shard_tokens have gathered.
class ShardSink {
 public:
  ShardSink(std::string prefix, std::string split, std::int64_t shard_tokens,
            std::vector<std::string>& written, ShardManifest& manifest)
      : prefix_(std::move(prefix)), split_(std::move(split)), shard_tokens_(shard_tokens),
        written_(written), manifest_(manifest) {}

  void add(const std::vector<std::uint16_t>& tokens) {
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
    total_ += static_cast<std::int64_t>(tokens.size());
    while (static_cast<std::int64_t>(pending_.size()) >= shard_tokens_) {
      write(std::span<const std::uint16_t>(pending_.data(), static_cast<std::size_t>(shard_tokens_)));
      pending_.erase(pending_.begin(), pending_.begin() + shard_tokens_);
    }
  }
  void finish() {
    if (!pending_.empty()) write(pending_);
    pending_.clear();
  }
  std::int64_t total() const { return total_; }

 private:
  void write(std::span<const std::uint16_t> tokens) {
    char index[16];
    std::snprintf(index, sizeof index, "%06d", static_cast<int>(written_.size()));
    const std::string path = prefix_ + index + ".bin";
    const std::uint32_t crc = write_token_shard(path, tokens);
    written_.push_back(path);
    manifest_.shards.push_back({fs::path(path).filename().string(), split_, static_cast<std::int64_t>(tokens.size()),
                                kShardHeaderBytes + 2 * tokens.size(), crc});
  }
  std::string prefix_, split_;
  std::int64_t shard_tokens_;
  std::vector<std::string>& written_;
  ShardManifest& manifest_;
  std::vector<std::uint16_t> pending_;
  std::int64_t total_ = 0;
};

bool looks_binary(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string head(kBinarySniffBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find('\0') != std::string::npos;
}

void check_options(const PrepareOptions& o) {
  if (o.tokenizer != "byte" && o.tokenizer != "gpt2") {
    throw InputError("--tokenizer", "(value)", "expected byte or gpt2, found \"" + o.tokenizer + "\"");
  }
  if (o.out_dir.empty()) throw InputError("--out", "(value)", "expected an output directory");
  if (o.name.empty() || o.name.find('/') != std::string::npos) {
    throw InputError("--name", "(value)", "expected a file name prefix without '/', found \"" + o.name + "\"");
  }
  if (o.shard_tokens < 1 || o.shard_tokens > kMaxShardTokens) {
    throw InputError("--shard-tokens", "(value)",
                     "expected 1..2147483647 (llm.c stores the count as int32), found " +
                         std::to_string(o.shard_tokens));
  }
  if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0)) {
    throw InputError("--val-fraction", "(value)",
                     "expected a fraction in [0, 1), found " + std::to_string(o.val_fraction));
  }
}

// Existing shards of this name would mix with the new ones; refuse or remove them (with their
// manifest, first: it must never describe shards it did not record).
void clear_old_shards(const PrepareOptions& o) {
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(o.out_dir)) {
    const std::string n = e.path().filename().string();
    if ((n.starts_with(o.name + "_train_") || n.starts_with(o.name + "_val_")) && n.ends_with(".bin")) {
      old.push_back(e.path());
    }
  }
  const fs::path manifest = fs::path(o.out_dir) / (o.name + ".shards.json");
  if (old.empty()) {
    if (fs::exists(manifest) && !o.overwrite) {
      throw InputError(o.out_dir, "(directory)",
                       "already holds " + manifest.filename().string() +
                           "; pass --overwrite to replace it or choose another --name");
    }
    fs::remove(manifest);
    return;
  }
  if (!o.overwrite) {
    throw InputError(o.out_dir, "(directory)",
                     "already holds " + std::to_string(old.size()) + " shard(s) named " + o.name +
                         "_train_*/" + o.name + "_val_* (e.g. " + old.front().filename().string() +
                         "); pass --overwrite to replace them or choose another --name");
  }
  fs::remove(manifest);
  for (const auto& p : old) fs::remove(p);
}

}  // namespace

PrepareSummary prepare_token_shards(const std::vector<std::string>& inputs,
                                    const PrepareOptions& options) {
  check_options(options);
  PrepareSummary summary;
  std::optional<Gpt2Tokenizer> gpt2;
  if (options.tokenizer == "gpt2") {
    gpt2 = Gpt2Tokenizer::load(options.vocab_dir);
    summary.vocab_size = gpt2->vocab_size();
  } else {
    summary.vocab_size = 256;
  }
  // Streaming encode: returns the bytes of `text` consumed (all of them when at_end).
  const auto encode = [&](std::string_view text, bool at_end, std::vector<std::uint16_t>& out) {
    if (gpt2) return gpt2->encode_prefix(text, at_end, out);
    for (unsigned char c : text) out.push_back(c);
    return text.size();
  };

  std::vector<std::string> files;
  for (const std::string& f : list_input_files(inputs)) {
    if (fs::file_size(f) == 0 || looks_binary(f)) {
      summary.skipped.push_back(f);
    } else {
      files.push_back(f);
      summary.input_bytes += fs::file_size(f);
    }
  }
  if (files.empty()) {
    throw InputError(inputs.empty() ? "(none)" : inputs.front(), "(file)",
                     "no text found (binary or empty files only)");
  }
  std::error_code ec;
  if (fs::exists(options.out_dir, ec) && !fs::is_directory(options.out_dir, ec)) {
    throw InputError("--out", options.out_dir, "is a file; expected a directory for the shards");
  }
  fs::create_directories(options.out_dir, ec);
  if (ec) throw InputError("--out", options.out_dir, "cannot create the directory: " + ec.message());
  clear_old_shards(options);

  const std::string prefix = (fs::path(options.out_dir) / options.name).string();
  ShardManifest manifest;
  manifest.tokenizer = options.tokenizer;
  manifest.vocab_size = summary.vocab_size;
  ShardSink train(prefix + "_train_", "train", options.shard_tokens, summary.train_shards, manifest);
  ShardSink val(prefix + "_val_", "val", options.shard_tokens, summary.val_shards, manifest);
  // Bytes still owed to the validation split; it ends at the first newline after that.
  auto val_bytes_left = static_cast<std::int64_t>(
      std::ceil(options.val_fraction * static_cast<double>(summary.input_bytes)));
  bool in_val = val_bytes_left > 0;
  std::uint64_t bytes_done = 0;
  std::vector<std::uint16_t> tokens;
  std::string carry;
  std::string block(kBlockBytes, '\0');

  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw InputError(file, "(file)", "cannot open the file");
    summary.files.push_back(file);
    tokens.clear();
    if (gpt2 && gpt2->end_of_text()) tokens.push_back(*gpt2->end_of_text());
    carry.clear();
    for (;;) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      const auto got = static_cast<std::size_t>(in.gcount());
      const bool file_end = got == 0;
      if (in.bad()) throw InputError(file, "(file)", "read error");
      carry.append(block.data(), got);
      bytes_done += got;
      if (in_val) {
        val_bytes_left -= static_cast<std::int64_t>(got);
        if (val_bytes_left <= 0) {
          // The split point lies in this block: end validation at the next newline after it.
          // carry[cut_from] is the last byte owed to validation.
          const std::size_t cut_from =
              carry.size() - std::min<std::size_t>(carry.size(), static_cast<std::size_t>(1 - val_bytes_left));
          const std::size_t nl = carry.find('\n', cut_from);
          if (nl != std::string::npos || file_end) {
            const std::size_t cut = nl == std::string::npos ? carry.size() : nl + 1;
            encode(std::string_view(carry).substr(0, cut), true, tokens);
            val.add(tokens);
            tokens.clear();
            carry.erase(0, cut);
            in_val = false;
          }
        }
      }
      carry.erase(0, encode(carry, file_end, tokens));
      (in_val ? val : train).add(tokens);
      tokens.clear();
      if (options.progress) {
        options.progress({bytes_done, summary.input_bytes, train.total() + val.total()});
      }
      if (file_end) break;
    }
  }
  train.finish();
  val.finish();
  // Last: the manifest vouches for shards that are all complete.
  summary.manifest = prefix + ".shards.json";
  write_shard_manifest(summary.manifest, manifest);
  summary.train_tokens = train.total();
  summary.val_tokens = val.total();
  return summary;
}

}  // namespace plait::data
