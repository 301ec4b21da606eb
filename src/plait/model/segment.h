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

// k segments of near-equal length; as in the Seq1F1B reference (split_solver.py), the remainder
// goes to the first segment, so earlier segments are never shorter than later ones.
std::vector<Segment> even_segments(int seq, int k);

}  // namespace plait::model
