#pragma once
// How plait inputs state the Seq1F1B segments of a sequence (train.segments of a config or plan
// file): a count k, cut into near-equal lengths, or the lengths themselves. It lives in core
// because the engine (model/segment), the runtime and the planner (which does not link model)
// all read segment lengths the same way.
#include <vector>

#include "plait/core/json_fields.h"

namespace plait {

// k lengths as equal as integers allow, the remainder seq % k added to the FIRST segment, as in
// the Seq1F1B reference (thunlp/Seq1F1B split_solver.py), so earlier segments are never shorter
// than later ones. Throws plait::Error unless 1 <= k <= seq.
std::vector<int> even_segment_lengths(int seq, int k);

// The "segments" field of a train section for sequences of `seq` tokens: an integer k in
// [1, seq] (cut by even_segment_lengths) or an array of lengths >= 1 summing to seq; absent, one
// segment {seq}. Errors are InputErrors naming the field, e.g.
// "cfg.json: train.segments: segment lengths sum to 10, expected train.seq 12".
std::vector<int> read_segment_lengths(const JsonFields& train, int seq);

}  // namespace plait
