#pragma once
// The token ids of one sequence segment: columns [start, start + length) of a (rows, seq) array,
// copied contiguous ((rows, length)), as a Seq1F1B unit feeds them to the embedding and the loss.
#include <cstdint>
#include <vector>

namespace plait::data {

void segment_columns(const std::vector<std::int32_t>& all, int rows, int seq, int start, int length,
                     std::vector<std::int32_t>& out);

}  // namespace plait::data
