// GPipe (Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
// Parallelism", arXiv 1811.06965, sec. 2.2): every rank runs the forwards of all m micro-batches,
// then all their backwards (FIFO, as torch.distributed.pipelining's ScheduleGPipe does).
// Peak in-flight activations: m micro-batches; bubble fraction (p-1)/(m+p-1).
#include "plait/schedule/generators.h"
#include "plait/schedule/layout.h"
#include "plait/schedule/one_f_one_b_pattern.h"

namespace plait::schedule {

namespace {

Schedule generate_gpipe(const PipelineShape& shape) {
  Schedule schedule = empty_schedule(interleaved_layout(shape.stages, 1, shape.microbatches, 1));
  const std::vector<Action> forwards = sequence_forward_order(shape.microbatches, 1, 0);
  const std::vector<Action> backwards = sequence_backward_order(shape.microbatches, 1, 0);
  for (auto& actions : schedule.ranks) {
    actions = forwards;
    actions.insert(actions.end(), backwards.begin(), backwards.end());
  }
  return schedule;
}

}  // namespace

ScheduleFamily gpipe_family() {
  return {
      .name = "gpipe",
      .title = "GPipe",
      .source = "Huang et al., GPipe, arXiv 1811.06965",
      .forwards_first = true,
      .generate = generate_gpipe,
  };
}

}  // namespace plait::schedule
