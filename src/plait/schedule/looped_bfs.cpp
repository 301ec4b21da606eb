// Breadth-first pipeline parallelism, "looped BFS" (Lamy-Poirier, "Breadth-First Pipeline
// Parallelism", MLSys 2023, arXiv 2211.05953; torch.distributed.pipelining's ScheduleLoopedBFS):
// Megatron's looping placement (chunk c of rank r is virtual stage c*p + r), but each rank runs
// a chunk's forwards for every micro-batch before moving to the next chunk (breadth first), then
// the backwards chunk v-1..0 the same way: GPipe over v chunks per rank. All m micro-batches are in
// flight at the turn (GPipe's memory); with m*k >= p the bubble is (p-1)/(v*k*m + p - 1) of the
// step, the interleaved schedule's, where GPipe's is (p-1)/(k*m + p - 1).
// Sequence-level form: units are (micro-batch, segment), forwards with segments ascending and
// backwards with segments descending (Seq1F1B's order, arXiv 2406.03488), micro-batches FIFO.
#include "plait/schedule/generators.h"
#include "plait/schedule/layout.h"
#include "plait/schedule/one_f_one_b_pattern.h"

namespace plait::schedule {

namespace {

Schedule generate_looped_bfs(const PipelineShape& shape) {
  const int p = shape.stages, v = shape.chunks, m = shape.microbatches, k = shape.segments;
  Schedule schedule = empty_schedule(interleaved_layout(p, v, m, k));
  std::vector<Action> order;
  for (int c = 0; c < v; ++c) {
    const std::vector<Action> forwards = sequence_forward_order(m, k, c);
    order.insert(order.end(), forwards.begin(), forwards.end());
  }
  for (int c = v - 1; c >= 0; --c) {
    const std::vector<Action> backwards = sequence_backward_order(m, k, c);
    order.insert(order.end(), backwards.begin(), backwards.end());
  }
  for (auto& actions : schedule.ranks) actions = order;
  return schedule;
}

}  // namespace

ScheduleFamily looped_bfs_family() {
  return {
      .name = "looped-bfs",
      .title = "Looped BFS (breadth-first pipeline)",
      .source = "Lamy-Poirier, Breadth-First Pipeline Parallelism, arXiv 2211.05953",
      .sequence_level = true,
      .fixed_chunks = 0,
      .placement = StagePlacement::interleaved,
      .forwards_first = true,
      .own_simulation_slots = true,
      .generate = generate_looped_bfs,
  };
}

}  // namespace plait::schedule
