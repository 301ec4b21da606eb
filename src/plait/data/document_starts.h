#pragma once
// Where the documents of a shard stream start, for the loaders that pack documents
// (packed_sequences.h): from each shard's document boundary index where its shard manifest
// records one (document_index.h, checksummed), else -- shards of an older plait or llm.c's own --
// from the <|endoftext|> token that starts each document with GPT-2 (llm.c's data scripts write
// one before every document). Byte-level shards without an index have no separator: they are
// refused, naming the shard. The stream's first token always starts a document.
#include <cstdint>
#include <optional>
#include <vector>

#include "plait/data/token_source.h"

namespace plait::data {

// GPT-2's <|endoftext|> (encoder.json's last id), the first token of every document of a gpt2
// shard (llm.c's dev/data/fineweb.py writes it the same way).
constexpr std::uint16_t kGpt2EndOfText = 50256;

// Stream positions, increasing, the first 0. `files` are the ones `source` was built from (in
// order); `end_of_text`: the separator token for shards without an index (none for byte tokens).
std::vector<std::int64_t> document_starts(const std::vector<ShardSetSource::File>& files, const ShardSetSource& source,
                                          std::optional<std::uint16_t> end_of_text);

}  // namespace plait::data
