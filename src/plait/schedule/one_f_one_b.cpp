// 1F1B, also called PipeDream-Flush (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN
// Training", arXiv 2006.09503; and arXiv 2104.04473 sec. 2.2 for the Megatron form): rank r runs
// min(p - r - 1, m) warm-up forwards, then alternates one forward and one full backward, then
// drains the remaining backwards. Same bubble as GPipe, (p-1)/(m+p-1), but at most p
// micro-batches of activations in flight instead of m. It is Seq1F1B with one segment.
#include "plait/schedule/generators.h"
#include "plait/schedule/sequence_one_f_one_b.h"

namespace plait::schedule {

ScheduleFamily one_f_one_b_family() {
  return {
      .name = "1f1b",
      .title = "1F1B (PipeDream-Flush)",
      .source = "Narayanan et al., arXiv 2006.09503 and 2104.04473",
      .in_flight_limit = sequence_one_f_one_b_in_flight,
      .generate = fused_sequence_one_f_one_b,
  };
}

}  // namespace plait::schedule
