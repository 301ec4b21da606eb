#pragma once
// A greedy list scheduler: simulates a layout's ranks under fixed per-unit costs and records the
// order in which each rank would run its units if, whenever it is free, it picks
//   1. a ready backward (B, or BW when not split), oldest micro-batch first, deepest stage first;
//   2. else a ready forward, if the rank holds fewer than max_in_flight units (F started, W not
//      finished), deepest stage first, then oldest micro-batch;
//   3. else the oldest pending W (weight gradients fill what would be a bubble);
//   4. else it waits for the next completion.
// It is the heuristic idea of the zero-bubble authors' greedy V scheduler (sail-sg/
// zero-bubble-pipeline-parallelism, zerobubble/scheduler/zbv_greedy.py) in plait's own, simpler
// form. The order it returns is a real execution, so it cannot deadlock when receives are posted
// ahead. Units go segment 0..k-1 forwards and k-1..0 backwards within a micro-batch.
#include "plait/schedule/schedule.h"

namespace plait::schedule {

struct ListSchedulerOptions {
  double forward_cost = 1.0;
  double backward_cost = 1.0;  // B, or BW's B part
  double weight_cost = 1.0;    // W, or BW's W part
  bool split_backward = true;
  int max_in_flight = 0;  // 0: unlimited
};

// Throws plait::Error if the ranks stall (memory limit too small for the layout).
Schedule list_schedule(const Layout& layout, const ListSchedulerOptions& options);

}  // namespace plait::schedule
