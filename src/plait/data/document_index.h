#pragma once
// The document boundary index `plait data prepare` writes beside each token shard:
// <name>_<split>_<index>.docs next to <name>_<split>_<index>.bin. A header of 4 little-endian
// int32 -- [0] magic 20250624, [1] version 1, [2] the shard's token count, [3] the number of
// documents n -- then n little-endian uint32: the token offsets inside the shard at which
// documents start, strictly increasing, each below the token count. A file is valid only if its
// size is exactly 16 + 4 n bytes.
//
// The shard keeps llm.c's format and its <|endoftext|> before each document (GPT-2); the index
// adds what the tokens cannot say: where documents start in byte-tokenized shards (which have no
// separator), and where documents are without a scan of every token. A document may run across
// shards: a shard whose first token continues the previous shard's last document has no start
// at offset 0. The index's CRC-32C is recorded in the shard manifest beside the shard's
// (shard_manifest.h), and checked before the index is parsed.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plait/core/atomic_file.h"
#include "plait/core/directory.h"

namespace plait::data {

constexpr std::int32_t kDocumentIndexMagic = 20250624;
constexpr std::int32_t kDocumentIndexVersion = 1;
constexpr std::size_t kDocumentIndexHeaderBytes = 4 * sizeof(std::int32_t);

struct DocumentIndex {
  std::int64_t shard_tokens = 0;
  std::vector<std::uint32_t> starts;  // document starts, offsets in the shard
};

// "corpus_train_000003.docs" for "corpus_train_000003.bin" (a path keeps its directory); "" for
// a name not ending in ".bin".
std::string document_index_name(const std::string& shard_file);

// The file's bytes. Error when the starts are not strictly increasing below shard_tokens.
std::vector<std::byte> document_index_bytes(const DocumentIndex& index);

// Validates an index file's bytes; errors are InputErrors naming `file`, the byte offset of the
// field and the expected value.
DocumentIndex parse_document_index(std::span<const std::byte> bytes, const std::string& file);

// Writes `name` inside `dir` atomically (core/atomic_file.h: a temporary of a unique name made
// with O_EXCL | O_NOFOLLOW, renamed into place). Returns the file's CRC-32C.
std::uint32_t write_document_index(const Directory& dir, const std::string& name, const DocumentIndex& index,
                                   AtomicFile::Replace replace = AtomicFile::Replace::kNever);

// An index as a shard manifest lists it, for the reader: the file and the CRC-32C it must have.
struct DocumentIndexFile {
  std::string path;
  std::uint32_t crc32c = 0;
  std::string recorded_in;  // the manifest, for messages
};

// Reads and checks an index: never through a link at its name (O_NOFOLLOW: a planted link is
// refused, naming the file), its CRC-32C against the manifest's first, then its format, then
// that it describes a shard of `shard_tokens` tokens (`shard` names it in the error).
DocumentIndex read_document_index(const DocumentIndexFile& file, std::int64_t shard_tokens, const std::string& shard);

}  // namespace plait::data
