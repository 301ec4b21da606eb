// Seq1F1B-I (Sun et al., arXiv 2406.03488; thunlp/Seq1F1B): interleaved 1F1B over (micro-batch,
// segment) units, v chunks per rank. Warm-up on rank r: (v-1)*p + 2*(p-r-1) + (k-1) forward
// units when k divides p. Bubble about (p-1)/(v*k*m); peak activations
// ((v-1)p + 2(p-1) + k)/(v*k) micro-batches. The reference code requires m % p == 0; plait
// accepts any m by grouping micro-batches (see grouped_interleaving.h).
#include "plait/schedule/generators.h"
#include "plait/schedule/grouped_interleaving.h"

namespace plait::schedule {

ScheduleFamily seq1f1b_interleaved_family() {
  return {
      .name = "seq1f1b-i",
      .title = "Seq1F1B-I (interleaved Seq1F1B)",
      .source = "Sun et al., Seq1F1B, arXiv 2406.03488; thunlp/Seq1F1B",
      .sequence_level = true,
      .fixed_chunks = 0,
      .placement = StagePlacement::interleaved,
      .in_flight_limit = grouped_interleaving_in_flight,
      .one_segment_twin = "interleaved",
      .generate = grouped_interleaving,
  };
}

}  // namespace plait::schedule
