#pragma once
// A document-length distribution, for predicting packed work (plait sim --documents, plait plan
// --documents, plait bench runtime speed --documents, the balancing figures of docs/data.md):
// - "lognormal:MEDIAN:SIGMA[:SEED]": lengths drawn from std::lognormal_distribution(ln MEDIAN,
//   SIGMA) with std::mt19937_64(SEED) (seed 1 by default), rounded to the nearest integer and at
//   least 1 -- long-tailed as web text is (a few documents hold much of the tokens: with sigma
//   1.5 the mean is e^(1.125) = 3.1 times the median);
// - "histogram:PATH": a corpus's own, the lengths file plait data prepare writes beside the
//   shards (document_length_file.h; PATH the file or the data directory holding it): a bin drawn
//   in proportion to its documents, then a length uniformly within it, with std::mt19937_64(1).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plait/data/document_length_file.h"

namespace plait::data {

struct DocumentDistribution {
  double median = 300;
  double sigma = 1.5;
  std::uint64_t seed = 1;
  std::shared_ptr<const LengthHistogram> histogram;  // set: lengths drawn from it, not the lognormal
  // "lognormal(median 300, sigma 1.5, seed 1)", or "histogram data/x/corpus.lengths.json (41
  // documents, mean 16080.2 tokens, seed 1)"
  std::string text() const;
};

// Parses either form; throws plait::Error naming `flag` and the expected forms otherwise, and
// the file for a lengths file that cannot be read.
DocumentDistribution parse_document_distribution(const std::string& text, const std::string& flag);

// Document starts (the first 0) of a stream of `tokens` tokens cut by the distribution; the
// last document runs to the stream's end.
std::vector<std::int64_t> distribution_starts(const DocumentDistribution& d, std::int64_t tokens);

}  // namespace plait::data
