#include "plait/data/document_lengths.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "plait/core/error.h"

namespace plait::data {

LengthBin length_bin(std::int64_t length) {
  const int k = std::bit_width(static_cast<std::uint64_t>(length)) - 1;
  const std::int64_t width = k < 7 ? 1 : std::int64_t{1} << (k - 6);
  const std::int64_t lo = length - length % width;
  return {lo, lo + width - 1, 0, 0};
}

void DocumentLengths::add(std::int64_t length) {
  if (length < 1) throw Error("document lengths: a document of " + std::to_string(length) + " tokens");
  const auto k = static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(length)) - 1);
  if (buckets.size() <= k) buckets.resize(k + 1, 0);
  ++buckets[k];
  const LengthBin bin = length_bin(length);
  LengthBin& b = bins.try_emplace(bin.lo, bin).first->second;
  ++b.count;
  b.tokens += length;
  ++count;
  tokens += length;
  longest = std::max(longest, length);
}

std::vector<std::string> DocumentLengths::lines() const {
  std::vector<std::string> out;
  const std::int64_t most = buckets.empty() ? 0 : *std::max_element(buckets.begin(), buckets.end());
  std::size_t first = 0;
  while (first < buckets.size() && buckets[first] == 0) ++first;
  for (std::size_t k = first; k < buckets.size(); ++k) {
    const std::int64_t lo = std::int64_t{1} << k;
    char range[48];
    std::snprintf(range, sizeof range, "%lld-%lld", static_cast<long long>(lo), static_cast<long long>(2 * lo - 1));
    // A bar of up to 40 marks, one at least for a bucket that is not empty.
    const auto marks = static_cast<std::size_t>(buckets[k] == 0 ? 0 : std::max<std::int64_t>(1, 40 * buckets[k] / most));
    char line[96];
    std::snprintf(line, sizeof line, "%15s %10lld", range, static_cast<long long>(buckets[k]));
    out.push_back(std::string(line) + (marks ? "  " + std::string(marks, '#') : ""));
  }
  return out;
}

DocumentLengths document_lengths(std::span<const std::int64_t> starts, std::int64_t stream_tokens) {
  DocumentLengths d;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    d.add((i + 1 < starts.size() ? starts[i + 1] : stream_tokens) - starts[i]);
  }
  return d;
}

}  // namespace plait::data
