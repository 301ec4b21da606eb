#pragma once
// A contiguous piece of a micro-batch's sequence (Seq1F1B, ../shared/reference/seq1f1b.md):
// segment `index` covers absolute positions [start, start + length).
#include <vector>

namespace plait::model {

struct Segment {
  int index = 0;
  int start = 0;
  int length = 0;
  int end() const { return start + length; }
  bool operator==(const Segment&) const = default;
};

// The segments of a sequence cut at the given lengths (each >= 1, summing to seq).
std::vector<Segment> segments_from_lengths(int seq, const std::vector<int>& lengths);

// k segments of near-equal length, the remainder on the first (core's even_segment_lengths, as
// in the Seq1F1B reference).
std::vector<Segment> even_segments(int seq, int k);

}  // namespace plait::model
