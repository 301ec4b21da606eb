// Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", arXiv 2104.04473, sec. 2.2; Megatron-LM
// forward_backward_pipelining_with_interleaving): each rank holds v model chunks (chunk c of rank
// r is virtual stage c*p + r) and cycles through them, so the pipeline fills v times faster:
// bubble about (p-1)/(v*m) of the ideal time, peak activations p + (p-1)/v micro-batches.
// Megatron needs m % p == 0; plait accepts any m (see grouped_interleaving.h).
#include "plait/schedule/generators.h"
#include "plait/schedule/grouped_interleaving.h"

namespace plait::schedule {

ScheduleFamily interleaved_family() {
  return {
      .name = "interleaved",
      .title = "Interleaved 1F1B (Megatron-LM)",
      .source = "Narayanan et al., arXiv 2104.04473 sec. 2.2",
      .fixed_chunks = 0,
      .placement = StagePlacement::interleaved,
      .in_flight_limit = grouped_interleaving_in_flight,
      .generate = grouped_interleaving,
  };
}

}  // namespace plait::schedule
