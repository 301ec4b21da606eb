#pragma once
// TinyData's random tokens cut into documents and packed into sequences by the real loader
// (data::PackedSequences, data::SequentialLoader with data.packing "documents"): document lengths
// drawn uniformly from [1, 2 seq] (seeded), so rows hold several documents, padding before a
// document that does not fit, and pieces of documents longer than a sequence (continuations);
// with segments, documents straddle segment boundaries and segments start mid-document.
#include <cstdint>
#include <random>
#include <vector>

#include "plait/data/microbatch_shares.h"
#include "plait/data/packed_sequences.h"
#include "plait/data/sequential_loader.h"
#include "plait/data/token_source.h"
#include "plait/runtime/train_config.h"
#include "tiny_job.h"

namespace plait::runtime::test {

inline std::vector<std::int64_t> random_document_starts(std::int64_t tokens, int seq, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> length(1, 2 * seq);
  std::vector<std::int64_t> starts;
  for (std::int64_t at = 0; at < tokens; at += length(rng)) starts.push_back(at);
  return starts;
}

struct PackedTinyData {
  PackedTinyData(const TinyData& data, int seq, std::uint64_t seed = 3)
      : source(data.tokens),
        packing(random_document_starts(static_cast<std::int64_t>(data.tokens.size()), seq, seed),
                static_cast<std::int64_t>(data.tokens.size()), seq) {}
  data::SequentialLoader loader(const TrainConfig& global) const {
    return data::SequentialLoader(source, global.seq, global.microbatch_size,
                                  data::MicrobatchShares({global.microbatches}), {}, &packing);
  }
  data::TokenSpanSource source;
  data::PackedSequences packing;
};

}  // namespace plait::runtime::test
