#pragma once
// A unit's tokens as runs of consecutive positions, for the kernels that take the position of
// their first column (rotary.h's and embedding.h's pos0). A row packed from documents restarts
// its positions at each document (issue 24; docs/data.md, "Packing"), so under a document mask
// (kernels/attention.h, DocumentMask) a segment's row is cut at its documents' starts and each
// piece runs at the position of its first token inside its document: the rotary angles and
// GPT-2's learned positions of a document are those it has alone, wherever it lies in the row.
#include <cstddef>
#include <cstdint>

#include "plait/kernels/attention.h"
#include "plait/spec/sequence_partition.h"

namespace plait::model {

// Calls fn(first_row, rows, column, length, pos0) so that the calls together cover the unit's
// batch x seg.length tokens once each: rows [first_row, first_row + rows), columns [column,
// column + length) of the segment, whose positions are pos0, pos0 + 1, ... A kernel on (B, s, w)
// data then runs on rows x length of it from element (first_row * s + column) * w. Without a mask
// one call covers everything (all rows, the whole segment at seg.start), exactly as before
// documents; with one, a call per (row, piece of a document in the segment).
template <typename Fn>
void for_each_position_run(const kernels::DocumentMask& mask, int batch, const spec::Segment& seg,
                           Fn&& fn) {
  if (mask.start == nullptr) {
    fn(0, batch, 0, seg.length, seg.start);
    return;
  }
  for (int b = 0; b < batch; ++b) {
    const std::int32_t* first = mask.start + static_cast<std::size_t>(b) * mask.stride;
    for (int t = 0; t < seg.length;) {
      const int p = seg.start + t;
      int end = t + 1;
      while (end < seg.length && first[seg.start + end] == first[p]) ++end;
      fn(b, 1, t, end - t, p - first[p]);
      t = end;
    }
  }
}

}  // namespace plait::model
