#include "plait/data/document_mask.h"

#include <cstddef>
#include <string>

#include "plait/core/error.h"

namespace plait::data {

std::vector<std::int32_t> document_mask(const std::vector<SequenceDocuments>& rows, int seq) {
  bool whole = true;
  for (const SequenceDocuments& r : rows) whole = whole && r.starts.size() == 1 && r.tokens == seq;
  if (whole) return {};
  std::vector<std::int32_t> start(rows.size() * static_cast<std::size_t>(seq));
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const SequenceDocuments& r = rows[b];
    if (r.starts.empty() || r.starts[0] != 0 || r.tokens < 1 || r.tokens > seq) {
      throw Error("document mask: row " + std::to_string(b) + " of a micro-batch reports " +
                  std::to_string(r.starts.size()) + " documents over " + std::to_string(r.tokens) +
                  " tokens; expected the first at 0 and 1.." + std::to_string(seq) + " tokens");
    }
    std::int32_t* row = start.data() + b * seq;
    std::size_t j = 0;
    for (int p = 0; p < r.tokens; ++p) {
      while (j + 1 < r.starts.size() && r.starts[j + 1] <= p) ++j;
      row[p] = r.starts[j];
    }
    for (int p = r.tokens; p < seq; ++p) row[p] = r.tokens;  // the padding
  }
  return start;
}

std::vector<std::int64_t> attention_pairs(const std::vector<SequenceDocuments>& rows, int seq) {
  const std::vector<std::int32_t> start = document_mask(rows, seq);
  std::vector<std::int64_t> pairs(static_cast<std::size_t>(seq), 0);
  for (std::size_t b = 0; b < rows.size(); ++b) {
    for (int p = 0; p < seq; ++p) pairs[p] += p + 1 - (start.empty() ? 0 : start[b * seq + p]);
  }
  return pairs;
}

std::int64_t counted_targets(const BatchSource& source, std::int64_t step, int microbatches) {
  std::int64_t count = 0;
  for (int mb = 0; mb < microbatches; ++mb) {
    for (const SequenceDocuments& r : source.documents(step, mb)) count += r.tokens;
  }
  return count;
}

}  // namespace plait::data
