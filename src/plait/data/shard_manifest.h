#pragma once
// What `plait data prepare` wrote, recorded beside the shards so that they cannot rot or be
// mixed up silently: <dir>/<name>.shards.json, next to <name>_train_000000.bin ...
//
//   {"format": "plait-token-shards", "version": 2, "tokenizer": "gpt2", "vocab_size": 50257,
//    "shards": [{"file": "corpus_val_000000.bin", "split": "val", "tokens": 73178,
//                "bytes": 147380, "crc32c": "0x1a2b3c4d",
//                "documents": {"file": "corpus_val_000000.docs", "count": 412, "bytes": 1664,
//                              "crc32c": "0x5e6f7a8b"}}, ...]}
//
// Version 2 records each shard's document boundary index (document_index.h) with its CRC-32C;
// version 1 (an older plait's) has none, and its shards' documents are found by their
// <|endoftext|> tokens where the loader needs them (document_starts.h).
//
// The shards themselves stay llm.c's format, unchanged (token_shard.h): llm.c and other readers
// ignore the manifest, and shards without one (llm.c's own) still load, unverified.
#include <cstdint>
#include <optional>
#include <string>

#include "plait/core/atomic_file.h"
#include "plait/core/directory.h"
#include <string_view>
#include <vector>

#include "plait/data/token_source.h"

namespace plait::data {

// A shard's document boundary index (document_index.h), as the manifest records it.
struct DocumentIndexRecord {
  std::string file;  // document_index_name(the shard's file)
  std::int64_t count = 0;  // documents starting in the shard
  std::uint64_t bytes = 0;  // 16 + 4 x count
  std::uint32_t crc32c = 0;
};

struct ShardRecord {
  std::string file;   // a plain file name in the manifest's directory
  std::string split;  // "train" or "val"
  std::int64_t tokens = 0;
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;  // of the whole file, header included
  std::optional<DocumentIndexRecord> documents;  // every shard's in a version 2 manifest, none in 1
};

struct ShardManifest {
  std::string tokenizer;  // "byte" or "gpt2"
  int vocab_size = 0;
  std::vector<ShardRecord> shards;

  const ShardRecord* find(const std::string& file) const;
};

std::string shard_manifest_to_text(const ShardManifest& m);
// Strict (unknown fields, a file listed twice, a name with '/', malformed checksums, a version 2
// shard without its index are InputErrors naming `file` and the field).
ShardManifest parse_shard_manifest(std::string_view text, const std::string& file);
// Written atomically (core/atomic_file.h) as `name` inside `dir`, replacing a manifest there or
// never; or at a path the user names (replacing a file there, a link as an entry).
void write_shard_manifest(const Directory& dir, const std::string& name, const ShardManifest& m,
                          AtomicFile::Replace replace);
void write_shard_manifest(const std::string& path, const ShardManifest& m);

// The corpus name of a shard file: "corpus" for corpus_train_000003.bin (or llm.c's
// tiny_shakespeare_val.bin -> "tiny_shakespeare"); "" for another name.
std::string shard_corpus_name(const std::string& shard_file);
// <dir>/<name>.shards.json for a shard file <dir>/<name>_<split>_*.bin.
std::string shard_manifest_path(const std::string& shard_file);

// The shards of one split as the loader should read them: find_token_shards(path, split), and,
// where a manifest lies beside them, the CRC-32C each must have. Checks the listing against the
// directory (a shard missing, or one the manifest does not list, is an InputError: the stream
// would silently differ from the one prepared) and the tokenizer the config declares against
// the one that wrote them ("byte" shards declared as "gpt2", or the reverse, are refused). A
// shard whose manifest records a document index gets it in File::documents (read only by the
// loaders that pack documents).
std::vector<ShardSetSource::File> shards_to_read(const std::string& path, const std::string& split,
                                        const std::string& tokenizer, const std::string& declared_in);

}  // namespace plait::data
