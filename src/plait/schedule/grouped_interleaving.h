#pragma once
// The interleaved 1F1B order (Narayanan et al., arXiv 2104.04473 sec. 2.2; Megatron-LM's
// get_schedule_table), generalised to sequence segments (Seq1F1B-I, thunlp/Seq1F1B) and to any m:
//
// Micro-batches are taken in groups of at least G = ceil(p / k) (G*k >= p units, so the first
// chunk's units have come back around the ring before the next chunk needs them). Within a
// group, forwards go chunk 0..v-1, micro-batches ascending, segments ascending; backwards go
// chunk v-1..0, micro-batches ascending, segments descending. Megatron requires m % p == 0;
// plait splits m into floor(m/G) groups and gives the remainder one micro-batch at a time to
// the first groups (m < G: one group), which keeps every m deadlock-free (the last partial group
// of Megatron's table deadlocks for many m). Rank r warms up with
//     2 * (p - r - 1) + (v - 1) * (units in the first group) + (k - 1)
// forwards: Megatron's (p - r - 1) * 2 + (v - 1) * p when k = 1 and G divides m, and
// thunlp/Seq1F1B's (v - 1) * p + 2 * (p - r - 1) + (k - 1) when k divides p.
#include <vector>

#include "plait/schedule/one_f_one_b_pattern.h"
#include "plait/schedule/schedule_family.h"

namespace plait::schedule {

Schedule grouped_interleaving(const PipelineShape& shape);

// The same order with backwards emitted per `style` (split B/W for interleaved zero bubble) and,
// when given, rank r's W deferral from w_lag_of_rank (style.w_lag otherwise).
Schedule grouped_interleaving(const PipelineShape& shape, const BackwardStyle& style,
                              int (*w_lag_of_rank)(const PipelineShape& shape, int rank));

// The in-flight limit of rank r: its warm-up above plus the steady phase's first forward.
int grouped_interleaving_in_flight(const PipelineShape& shape, int rank);

// The group sizes used for m micro-batches with minimum group size `group` (exposed for tests).
std::vector<int> interleaving_groups(int microbatches, int group);

}  // namespace plait::schedule
