#pragma once
// A named document-length distribution, for predicting packed work without a corpus (plait sim
// --documents, the balancing figures of docs/data.md): "lognormal:MEDIAN:SIGMA[:SEED]", lengths
// drawn from std::lognormal_distribution(ln MEDIAN, SIGMA) with std::mt19937_64(SEED) (seed 1 by
// default), rounded to the nearest integer and at least 1 -- long-tailed as web text is (a few
// documents hold much of the tokens: with sigma 1.5 the mean is e^(1.125) = 3.1 times the median).
#include <cstdint>
#include <string>
#include <vector>

namespace plait::data {

struct DocumentDistribution {
  double median = 300;
  double sigma = 1.5;
  std::uint64_t seed = 1;
  std::string text() const;  // "lognormal(median 300, sigma 1.5, seed 1)"
};

// Parses the named form; throws plait::Error naming `flag` and the expected form otherwise.
DocumentDistribution parse_document_distribution(const std::string& text, const std::string& flag);

// Document starts (the first 0) of a stream of `tokens` tokens cut by the distribution; the
// last document runs to the stream's end.
std::vector<std::int64_t> distribution_starts(const DocumentDistribution& d, std::int64_t tokens);

}  // namespace plait::data
