#include "plait/data/packed_sequences.h"

#include <algorithm>
#include <array>
#include <string>

#include "plait/core/crc32c.h"
#include "plait/core/error.h"

namespace plait::data {

PackedSequences::PackedSequences(std::vector<std::int64_t> document_starts, std::int64_t stream_tokens, int seq)
    : starts_(std::move(document_starts)), stream_tokens_(stream_tokens), seq_(seq) {
  if (seq <= 0) throw Error("packed sequences: seq must be positive, found " + std::to_string(seq));
  if (stream_tokens < 2) {
    throw Error("packed sequences: a stream of " + std::to_string(stream_tokens) +
                " tokens has no input with a target");
  }
  if (starts_.empty() || starts_.front() != 0 || !std::is_sorted(starts_.begin(), starts_.end()) ||
      std::adjacent_find(starts_.begin(), starts_.end()) != starts_.end()) {
    throw Error("packed sequences: document starts must increase from 0");
  }
  const std::int64_t inputs = stream_tokens - 1;
  starts_.erase(std::lower_bound(starts_.begin(), starts_.end(), inputs), starts_.end());

  std::int64_t open_start = 0;  // the sequence being filled: [open_start, open_start + used)
  std::int64_t used = 0;
  const auto close = [&] {
    if (used == 0) return;
    sequences_.push_back({open_start, static_cast<std::int32_t>(used)});
    padding_ += seq - used;
    used = 0;
  };
  for (std::size_t d = 0; d < starts_.size(); ++d) {
    std::int64_t pos = starts_[d];
    std::int64_t left = (d + 1 < starts_.size() ? starts_[d + 1] : inputs) - pos;
    // Fits in what is left of the open sequence: appended. A document of at most seq tokens that
    // does not fit starts a fresh sequence (the open one keeps its room as padding); a longer one
    // is split, filling the room and then whole sequences.
    if (left > seq - used && left <= seq) close();
    while (left > 0) {
      if (used == 0) open_start = pos;
      const std::int64_t n = std::min(left, seq - used);
      used += n;
      pos += n;
      left -= n;
      if (used == seq) close();
    }
  }
  close();
  for (const PackedSequence& s : sequences_) {
    std::array<std::byte, 12> b{};
    for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>((static_cast<std::uint64_t>(s.start) >> (8 * i)) & 0xFF);
    for (int i = 0; i < 4; ++i) b[8 + i] = static_cast<std::byte>((static_cast<std::uint32_t>(s.tokens) >> (8 * i)) & 0xFF);
    layout_crc_ = crc32c(b, layout_crc_);
  }
}

SequenceDocuments PackedSequences::documents(std::int64_t i) const {
  const PackedSequence& s = at(i);
  SequenceDocuments d;
  d.tokens = s.tokens;
  d.starts.push_back(0);
  auto it = std::lower_bound(starts_.begin(), starts_.end(), s.start);
  d.continues = it == starts_.end() || *it != s.start;
  if (!d.continues) ++it;
  for (; it != starts_.end() && *it < s.start + s.tokens; ++it) {
    d.starts.push_back(static_cast<std::int32_t>(*it - s.start));
  }
  return d;
}

}  // namespace plait::data
