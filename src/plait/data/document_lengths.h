#pragma once
// How long a split's documents are, in tokens, counted in log2 buckets: bucket k holds the
// lengths in [2^k, 2^(k+1)). `plait data prepare` prints it per split; with documents packed into
// sequences (packed_sequences.h) attention's work grows as the sum of the squared lengths, so
// the tail of this histogram is what balancing will have to spread (issue 24).
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace plait::data {

// A bin of the fine histogram (document_length_file.h): `count` documents of lo .. hi tokens,
// `tokens` in all.
struct LengthBin {
  std::int64_t lo = 0, hi = 0, count = 0, tokens = 0;
  bool operator==(const LengthBin&) const = default;
};

// The fine bin of a length: exact below 128 tokens, then 64 bins per octave (a bin of lengths
// 2^k .. 2^(k+1) - 1, k >= 7, is 2^(k-6) wide, under 1.6% of its lengths), so a histogram of any
// corpus has at most 64 bins per octave and draws from it keep the lengths' squares (attention
// work) within 3.2%.
LengthBin length_bin(std::int64_t length);

struct DocumentLengths {
  std::int64_t count = 0;
  std::int64_t tokens = 0;
  std::int64_t longest = 0;
  std::vector<std::int64_t> buckets;  // buckets[k]: documents of 2^k .. 2^(k+1) - 1 tokens
  std::map<std::int64_t, LengthBin> bins;  // the fine histogram (length_bin), by its lo

  // A document of `length` >= 1 tokens.
  void add(std::int64_t length);
  // One line per bucket from the first non-empty one to the last: "         64-127       1234  ####"
  // (a bar of up to 40 marks, scaled to the fullest bucket).
  std::vector<std::string> lines() const;
};

// The lengths of the documents starting at `starts` (stream positions, increasing, the first 0)
// in a stream of `stream_tokens` tokens: each runs to the next start or the stream's end.
DocumentLengths document_lengths(std::span<const std::int64_t> starts, std::int64_t stream_tokens);

}  // namespace plait::data
