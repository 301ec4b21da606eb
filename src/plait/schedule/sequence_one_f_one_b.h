#pragma once
// The shared core of 1F1B, Seq1F1B, ZB-H1 and seq-zb: the 1F1B pattern over (micro-batch,
// segment) units on a plain pipeline (one chunk per rank), rank r warming up with
// p - r - 1 + (k - 1) forwards. Defined in seq1f1b.cpp, of which the others are special cases:
// 1F1B is Seq1F1B with k = 1 and ZB-H1 is seq-zb with k = 1, so each pair shares one generator.
#include "plait/schedule/one_f_one_b_pattern.h"
#include "plait/schedule/schedule_family.h"

namespace plait::schedule {

// w_lag_of_rank (optional) overrides style.w_lag per rank.
Schedule sequence_one_f_one_b(const PipelineShape& shape, const BackwardStyle& style,
                              int (*w_lag_of_rank)(int rank, int ranks));

// Fused backwards: the generator of 1f1b and seq1f1b (seq1f1b.cpp).
Schedule fused_sequence_one_f_one_b(const PipelineShape& shape);
// Split backwards with ZB-H1's deferral: the generator of zb-h1 and seq-zb (zb_h1.cpp).
Schedule zero_bubble_sequence_one_f_one_b(const PipelineShape& shape);

// Their in-flight limit: the warm-up p - r - 1 + (k - 1) plus the steady phase's first forward.
int sequence_one_f_one_b_in_flight(const PipelineShape& shape, int rank);

// ZB-H1's deferral: rank r keeps the W's of its first r steady-state backwards for the drain
// (zb_h1.cpp; also used by seq-zb).
int zero_bubble_w_lag(int rank, int ranks);
int zero_bubble_deferred_weights(const PipelineShape& shape, int rank);

}  // namespace plait::schedule
