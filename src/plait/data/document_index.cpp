#include "plait/data/document_index.h"

#include <filesystem>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"
#include "plait/data/little_endian.h"

namespace plait::data {
namespace fs = std::filesystem;

std::string document_index_name(const std::string& shard_file) {
  if (shard_file.size() <= 4 || !shard_file.ends_with(".bin")) return "";
  return shard_file.substr(0, shard_file.size() - 4) + ".docs";
}

std::vector<std::byte> document_index_bytes(const DocumentIndex& index) {
  if (index.shard_tokens < 0 || index.shard_tokens > 2147483647 || index.starts.size() > 2147483647u) {
    throw Error("document index: " + std::to_string(index.shard_tokens) + " tokens, " +
                std::to_string(index.starts.size()) + " documents do not fit the int32 header");
  }
  std::vector<std::byte> bytes(kDocumentIndexHeaderBytes + 4 * index.starts.size());
  write_le_int32(bytes, 0, kDocumentIndexMagic);
  write_le_int32(bytes, 4, kDocumentIndexVersion);
  write_le_int32(bytes, 8, static_cast<std::int32_t>(index.shard_tokens));
  write_le_int32(bytes, 12, static_cast<std::int32_t>(index.starts.size()));
  for (std::size_t i = 0; i < index.starts.size(); ++i) {
    if (index.starts[i] >= index.shard_tokens || (i > 0 && index.starts[i] <= index.starts[i - 1])) {
      throw Error("document index: start " + std::to_string(i) + " (" + std::to_string(index.starts[i]) +
                  ") is not above the previous one and below the shard's " + std::to_string(index.shard_tokens) +
                  " tokens");
    }
    write_le_uint32(bytes, kDocumentIndexHeaderBytes + 4 * i, index.starts[i]);
  }
  return bytes;
}

DocumentIndex parse_document_index(std::span<const std::byte> bytes, const std::string& file) {
  if (bytes.size() < kDocumentIndexHeaderBytes) {
    throw InputError(file, "offset 0 (header)",
                     "expected a 16-byte header of 4 int32, but the file has " + std::to_string(bytes.size()) + " bytes");
  }
  const std::int32_t magic = read_le_int32(bytes, 0);
  if (magic != kDocumentIndexMagic) {
    throw InputError(file, "offset 0 (magic)",
                     "expected 20250624 (a plait document index), found " + std::to_string(magic));
  }
  const std::int32_t version = read_le_int32(bytes, 4);
  if (version != kDocumentIndexVersion) {
    throw InputError(file, "offset 4 (version)", "expected 1, found " + std::to_string(version));
  }
  DocumentIndex index;
  index.shard_tokens = read_le_int32(bytes, 8);
  if (index.shard_tokens < 0) {
    throw InputError(file, "offset 8 (token count)", "expected a count >= 0, found " + std::to_string(index.shard_tokens));
  }
  const std::int32_t count = read_le_int32(bytes, 12);
  const std::uint64_t expected = kDocumentIndexHeaderBytes + 4 * static_cast<std::uint64_t>(count < 0 ? 0 : count);
  if (count < 0 || bytes.size() != expected) {
    throw InputError(file, "offset 12 (document count)",
                     "the header says " + std::to_string(count) + " documents, so the file should have 16 + 4 x " +
                         std::to_string(count) + " = " + std::to_string(expected) + " bytes, found " +
                         std::to_string(bytes.size()));
  }
  index.starts.resize(static_cast<std::size_t>(count));
  std::int64_t previous = -1;
  for (std::size_t i = 0; i < index.starts.size(); ++i) {
    const std::size_t at = kDocumentIndexHeaderBytes + 4 * i;
    const std::uint32_t s = read_le_uint32(bytes, at);
    if (static_cast<std::int64_t>(s) <= previous || static_cast<std::int64_t>(s) >= index.shard_tokens) {
      throw InputError(file, "offset " + std::to_string(at) + " (document " + std::to_string(i) + ")",
                       "expected a start above " + std::to_string(previous) + " and below the shard's " +
                           std::to_string(index.shard_tokens) + " tokens, found " + std::to_string(s));
    }
    index.starts[i] = s;
    previous = s;
  }
  return index;
}

std::uint32_t write_document_index(const Directory& dir, const std::string& name, const DocumentIndex& index,
                                   AtomicFile::Replace replace) {
  AtomicFile file(dir, name, replace);
  file.write(document_index_bytes(index));
  const std::uint32_t crc = file.crc32c();
  file.commit();
  return crc;
}

DocumentIndex read_document_index(const DocumentIndexFile& file, std::int64_t shard_tokens, const std::string& shard) {
  const fs::path p(file.path);
  const Directory dir = Directory::open(p.has_parent_path() ? p.parent_path().string() : ".");
  // An index holds at most one start per token.
  const std::string text =
      dir.read_file(p.filename().string(), kDocumentIndexHeaderBytes + 4 * static_cast<std::size_t>(shard_tokens));
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  if (const std::uint32_t crc = crc32c(bytes); crc != file.crc32c) {
    throw InputError(file.path, "(checksum)",
                     file.recorded_in + " records CRC-32C " + crc32c_text(file.crc32c) + ", the file's is " +
                         crc32c_text(crc) + "; the document index is corrupted (or was changed since it was prepared)");
  }
  DocumentIndex index = parse_document_index(bytes, file.path);
  if (index.shard_tokens != shard_tokens) {
    throw InputError(file.path, "offset 8 (token count)",
                     "the index describes a shard of " + std::to_string(index.shard_tokens) + " tokens, but " + shard +
                         " has " + std::to_string(shard_tokens));
  }
  return index;
}

}  // namespace plait::data
