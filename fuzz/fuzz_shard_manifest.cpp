// Fuzzes the token shard manifest parser (<name>.shards.json, data/shard_manifest.h): anything
// but a plait::Error is a finding, and a manifest it accepts must survive a write/parse round
// trip unchanged (what plait data prepare writes, plait train reads back).
#include <cstdint>
#include <string_view>

#include "plait/core/error.h"
#include "plait/data/shard_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::data;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ShardManifest m = parse_shard_manifest(text, "corpus.shards.json");
    const ShardManifest again = parse_shard_manifest(shard_manifest_to_text(m), "corpus.shards.json");
    if (again.tokenizer != m.tokenizer || again.vocab_size != m.vocab_size || again.shards.size() != m.shards.size()) {
      __builtin_trap();
    }
    for (std::size_t i = 0; i < m.shards.size(); ++i) {
      const ShardRecord& a = m.shards[i];
      const ShardRecord& b = again.shards[i];
      if (a.file != b.file || a.split != b.split || a.tokens != b.tokens || a.bytes != b.bytes ||
          a.crc32c != b.crc32c || m.find(a.file) != &m.shards[i] || a.bytes != 1024 + 2 * static_cast<std::uint64_t>(a.tokens)) {
        __builtin_trap();
      }
      // A version 2 record's document index: named after the shard, its size from its count.
      if (a.documents.has_value() != b.documents.has_value()) __builtin_trap();
      if (a.documents && (a.documents->file != b.documents->file || a.documents->count != b.documents->count ||
                          a.documents->bytes != b.documents->bytes || a.documents->crc32c != b.documents->crc32c ||
                          a.documents->bytes != 16 + 4 * static_cast<std::uint64_t>(a.documents->count) ||
                          a.documents->count > a.tokens)) {
        __builtin_trap();
      }
    }
  } catch (const plait::Error&) {
  }
  return 0;
}
