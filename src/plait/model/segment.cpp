#include "plait/model/segment.h"

#include <string>

#include "plait/core/error.h"
#include "plait/core/segment_lengths.h"

namespace plait::model {

std::vector<Segment> segments_from_lengths(int seq, const std::vector<int>& lengths) {
  std::vector<Segment> segments;
  int start = 0;
  for (int len : lengths) {
    if (len < 1) throw Error("segment lengths must be >= 1, found " + std::to_string(len));
    segments.push_back({static_cast<int>(segments.size()), start, len});
    start += len;
  }
  if (start != seq) {
    throw Error("segment lengths sum to " + std::to_string(start) + ", expected the sequence length " +
                std::to_string(seq));
  }
  return segments;
}

std::vector<Segment> even_segments(int seq, int k) {
  return segments_from_lengths(seq, even_segment_lengths(seq, k));
}

}  // namespace plait::model
