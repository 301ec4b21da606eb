#include "plait/data/shard_preparer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "plait/core/atomic_file.h"
#include "plait/core/directory.h"
#include "plait/core/directory_lock.h"
#include "plait/core/error.h"
#include "plait/core/unique_name.h"
#include "plait/data/document_index.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/data/document_length_file.h"
#include "plait/data/input_files.h"
#include "plait/data/shard_manifest.h"
#include "plait/data/token_shard.h"

namespace plait::data {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kBlockBytes = 1 << 20;
constexpr std::size_t kBinarySniffBytes = 8000;  // git's buffer_is_binary() looks this far

// One split's shards, written as tokens arrive into the run's staging directory: a shard is
// committed (renamed into the staging directory) each time shard_tokens have gathered, with its
// document boundary index beside it (document_index.h). Documents start where start_document()
// says (before the first token of a file) and may run across shards; the split's first document
// may be the rest of one the validation split cut.
class ShardSink {
 public:
  ShardSink(const Directory& staging, std::string prefix, std::string split, std::int64_t shard_tokens,
            std::vector<std::string>& written, ShardManifest& manifest)
      : staging_(staging), prefix_(std::move(prefix)), split_(std::move(split)), shard_tokens_(shard_tokens),
        written_(written), manifest_(manifest) {}

  // The next token added starts a document.
  void start_document() { document_pending_ = true; }

  void add(std::span<const std::uint16_t> tokens) {
    total_ += static_cast<std::int64_t>(tokens.size());
    while (!tokens.empty()) {
      if (!shard_) {
        char index[16];
        std::snprintf(index, sizeof index, "%06d", static_cast<int>(written_.size()));
        name_ = prefix_ + split_ + "_" + index + ".bin";
        shard_ = std::make_unique<TokenShardWriter>(staging_, name_);
      }
      if (document_pending_) {
        starts_.push_back(static_cast<std::uint32_t>(shard_->tokens()));
        if (document_tokens_ > 0) lengths_.add(document_tokens_);
        document_tokens_ = 0;
        document_pending_ = false;
      }
      const auto room = static_cast<std::size_t>(shard_tokens_ - shard_->tokens());
      const std::size_t n = std::min(room, tokens.size());
      shard_->add(tokens.first(n));
      document_tokens_ += static_cast<std::int64_t>(n);
      tokens = tokens.subspan(n);
      if (shard_->tokens() == shard_tokens_) finish_shard();
    }
  }
  // The split's end: its last shard and last document.
  void finish() {
    finish_shard();
    if (document_tokens_ > 0) lengths_.add(document_tokens_);
    document_tokens_ = 0;
  }
  std::int64_t total() const { return total_; }
  const std::vector<std::string>& indexes() const { return indexes_; }
  const DocumentLengths& lengths() const { return lengths_; }

 private:
  void finish_shard() {
    if (!shard_) return;
    const std::int64_t n = shard_->tokens();
    const DocumentIndex index{n, std::move(starts_)};
    starts_.clear();
    const std::string index_name = document_index_name(name_);
    const std::uint32_t index_crc = write_document_index(staging_, index_name, index);
    indexes_.push_back(index_name);
    const std::uint32_t crc = shard_->commit();
    shard_.reset();
    written_.push_back(name_);
    const auto documents = static_cast<std::int64_t>(index.starts.size());
    manifest_.shards.push_back({name_, split_, n, kShardHeaderBytes + 2 * static_cast<std::uint64_t>(n), crc,
                                DocumentIndexRecord{index_name, documents,
                                                    kDocumentIndexHeaderBytes + 4 * static_cast<std::uint64_t>(documents),
                                                    index_crc}});
  }

  const Directory& staging_;
  std::string prefix_, split_;
  std::int64_t shard_tokens_;
  std::vector<std::string>& written_;  // file names, in the staging directory until published
  ShardManifest& manifest_;
  std::unique_ptr<TokenShardWriter> shard_;
  std::string name_;
  std::int64_t total_ = 0;
  std::vector<std::uint32_t> starts_;  // of the shard being written
  std::vector<std::string> indexes_;   // index file names, in the staging directory until published
  bool document_pending_ = false;
  std::int64_t document_tokens_ = 0;  // of the document being written
  DocumentLengths lengths_;
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

// Existing shards of this name (and their manifest) would mix with the new ones: refused, or
// with --overwrite returned for publish() to remove once the new ones are complete.
std::vector<std::string> old_shards(const Directory& out, const PrepareOptions& o) {
  std::vector<std::string> old;
  for (const std::string& n : out.names()) {
    if ((n.starts_with(o.name + "_train_") || n.starts_with(o.name + "_val_")) &&
        (n.ends_with(".bin") || n.ends_with(".docs"))) {
      old.push_back(n);
    }
  }
  const std::string manifest = o.name + ".shards.json";
  const bool has_manifest = out.kind_of(manifest) != Directory::Kind::kMissing;
  if (!o.overwrite && !old.empty()) {
    throw InputError(o.out_dir, "(directory)",
                     "already holds " + std::to_string(old.size()) + " shard(s) named " + o.name + "_train_*/" + o.name +
                         "_val_* (e.g. " + old.front() + "); pass --overwrite to replace them or choose another --name");
  }
  if (!o.overwrite && has_manifest) {
    throw InputError(o.out_dir, "(directory)",
                     "already holds " + manifest + "; pass --overwrite to replace it or choose another --name");
  }
  if (has_manifest) old.insert(old.begin(), manifest);  // removed first: it never describes a mix
  // The lengths file describes the shards of the name: replaced with them, refused like them.
  const std::string lengths = document_lengths_file_name(o.name);
  if (out.kind_of(lengths) != Directory::Kind::kMissing) {
    if (!o.overwrite) {
      throw InputError(o.out_dir, "(directory)",
                       "already holds " + lengths + "; pass --overwrite to replace it or choose another --name");
    }
    old.push_back(lengths);
  }
  return old;
}

// A staging directory of a prepare run: ".<name>.prepare-<16 hex digits>".
bool is_prepare_staging(const std::string& n) {
  const std::size_t at = n.rfind(".prepare-");
  return n.starts_with(".") && at != std::string::npos && is_temporary_name("x.tmp-" + n.substr(at + 9));
}

// What runs that ended early left in --out: their staging directories and temporary files.
// Called under the lock only, when no live run can own them.
std::vector<std::string> remove_abandoned(const Directory& out) {
  std::vector<std::string> removed;
  for (const std::string& n : out.names()) {
    if (is_prepare_staging(n) || is_temporary_name(n)) {
      out.remove_tree(n);
      removed.push_back(n);
    }
  }
  return removed;
}

// The streaming loop over every file: blocks of 1 MiB through the tokenizer into the sinks,
// the validation split first (the first ceil(val_fraction x bytes) bytes, to the end of their
// line).
void stream_files(const std::vector<std::string>& files, const PrepareOptions& options, std::optional<Gpt2Tokenizer>& gpt2,
                  ShardSink& train, ShardSink& val, PrepareSummary& summary) {
  // Streaming encode: returns the bytes of `text` consumed (all of them when at_end).
  const auto encode = [&](std::string_view text, bool at_end, std::vector<std::uint16_t>& out) {
    if (gpt2) return gpt2->encode_prefix(text, at_end, out);
    for (unsigned char c : text) out.push_back(c);
    return text.size();
  };
  // Bytes still owed to the validation split; it ends at the first newline after that.
  auto val_bytes_left = static_cast<std::int64_t>(
      std::ceil(options.val_fraction * static_cast<double>(summary.input_bytes)));
  bool in_val = val_bytes_left > 0;
  std::uint64_t bytes_done = 0;
  std::vector<std::uint16_t> tokens;
  std::string carry;
  std::string block(kBlockBytes, '\0');
  const auto flush = [&](ShardSink& sink) {
    sink.add(tokens);
    tokens.clear();
    // The tokens of one huge piece arrive at once; do not keep room for them.
    if (tokens.capacity() > kBlockBytes) std::vector<std::uint16_t>().swap(tokens);
  };

  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw InputError(file, "(file)", "cannot open the file");
    summary.files.push_back(file);
    (in_val ? val : train).start_document();
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
            flush(val);
            carry.erase(0, cut);
            in_val = false;
          }
        }
      }
      carry.erase(0, encode(carry, file_end, tokens));
      flush(in_val ? val : train);
      if (options.progress) options.progress({bytes_done, summary.input_bytes, train.total() + val.total()});
      if (file_end) break;
    }
  }
  train.finish();
  val.finish();
}

// Moves the staged shards into --out (never over anything), after removing the old ones of
// this name (--overwrite), then writes the training split's document lengths
// (document_length_file.h) and the manifest, last: it vouches for shards that are all in place.
// On an error, what it moved or wrote is removed again (it is this run's).
void publish(const Directory& out, const Directory& staging, const std::vector<std::string>& old,
             const std::vector<std::string>& shards, const ShardManifest& manifest, const std::string& manifest_name,
             const std::string& lengths_name, const std::string& lengths_text) {
  for (const std::string& n : old) out.remove_file(n);
  std::vector<std::string> moved;
  try {
    for (const std::string& n : shards) {
      staging.rename(n, out, n, false);
      moved.push_back(n);
    }
    write_file_atomically(out, lengths_name, lengths_text, AtomicFile::Replace::kNever);
    moved.push_back(lengths_name);
    write_shard_manifest(out, manifest_name, manifest, AtomicFile::Replace::kNever);
  } catch (...) {
    for (const std::string& n : moved) out.remove_file(n);
    throw;
  }
  out.sync();
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
  for (const InputLink& l : input_links(inputs)) summary.links.push_back(l.given + " -> " + l.resolved);
  std::error_code ec;
  if (fs::exists(options.out_dir, ec) && !fs::is_directory(options.out_dir, ec)) {
    throw InputError("--out", options.out_dir, "is a file; expected a directory for the shards");
  }
  const Directory out = Directory::create(options.out_dir, "--out");
  // One run at a time: a second prepare into this directory is refused here, before anything.
  const DirectoryLock lock(out, "a data --out directory");
  summary.lock_warning = lock.warning();
  if (lock.warning().empty()) summary.removed = remove_abandoned(out);
  const std::vector<std::string> old = old_shards(out, options);

  // Shards go to a staging directory of this run's own, moved into --out only when all are
  // complete; on any error it is removed, with every temporary file in it.
  const std::string staging_name = "." + options.name + ".prepare-" + unique_token();
  const Directory staging = out.make_child(staging_name);
  try {
    ShardManifest manifest;
    manifest.tokenizer = options.tokenizer;
    manifest.vocab_size = summary.vocab_size;
    std::vector<std::string> train_names, val_names;
    ShardSink train(staging, options.name + "_", "train", options.shard_tokens, train_names, manifest);
    ShardSink val(staging, options.name + "_", "val", options.shard_tokens, val_names, manifest);
    stream_files(files, options, gpt2, train, val, summary);
    summary.train_tokens = train.total();
    summary.val_tokens = val.total();
    summary.train_documents = train.lengths();
    summary.val_documents = val.lengths();
    if (summary.train_tokens == 0) {
      // (The validation split is never empty: a fraction > 0 of any text is at least a byte.)
      char f[32];
      std::snprintf(f, sizeof f, "%g", options.val_fraction);
      throw InputError("--val-fraction", f,
                       "the validation split (the first " + std::string(f) + " of the " +
                           std::to_string(summary.input_bytes) +
                           " input bytes, extended to the end of their line) takes all of the text, leaving the "
                           "training split empty; lower --val-fraction, or give text of more lines");
    }
    std::vector<std::string> shards = val_names;
    shards.insert(shards.end(), train_names.begin(), train_names.end());
    shards.insert(shards.end(), val.indexes().begin(), val.indexes().end());
    shards.insert(shards.end(), train.indexes().begin(), train.indexes().end());
    summary.manifest = out.path_of(options.name + ".shards.json");
    summary.lengths = out.path_of(document_lengths_file_name(options.name));
    publish(out, staging, old, shards, manifest, options.name + ".shards.json", document_lengths_file_name(options.name),
            document_lengths_text(summary.train_documents, "train"));
    out.remove_tree(staging_name);
    for (const std::string& n : train_names) summary.train_shards.push_back(out.path_of(n));
    for (const std::string& n : val_names) summary.val_shards.push_back(out.path_of(n));
  } catch (...) {
    out.remove_tree(staging_name);
    throw;
  }
  return summary;
}

}  // namespace plait::data
