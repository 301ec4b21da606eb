#pragma once
// The shared core of 1F1B, Seq1F1B, ZB-H1 and seq-zb: the 1F1B pattern over (micro-batch,
// segment) units on a plain pipeline (one chunk per rank), rank r warming up with
// p - r - 1 + (k - 1) forwards. Defined in seq1f1b.cpp, of which the others are special cases.
#include "plait/schedule/one_f_one_b_pattern.h"
#include "plait/schedule/schedule_family.h"

namespace plait::schedule {

// w_lag_of_rank (optional) overrides style.w_lag per rank.
Schedule sequence_one_f_one_b(const PipelineShape& shape, const BackwardStyle& style,
                              int (*w_lag_of_rank)(int rank, int ranks));

// ZB-H1's deferral: rank r keeps the W's of its first r steady-state backwards for the drain
// (zb_h1.cpp; also used by seq-zb).
int zero_bubble_w_lag(int rank, int ranks);

}  // namespace plait::schedule
