#pragma once
// A greedy list scheduler: simulates a layout's ranks under given per-unit costs and records the
// order in which each rank would run its units if, whenever it is free, it picks
//   1. a ready backward (B, or BW when not split), oldest micro-batch first, deepest stage first;
//   2. else a ready forward, if the rank holds fewer than its in-flight limit of units (F
//      started, W not finished), deepest stage first, then oldest micro-batch;
//   3. else the oldest pending W (weight gradients fill what would be a bubble);
//   4. else, at the limit, a ready forward of a micro-batch the rank already holds (its next
//      segment or chunk), never a new one: segments or chunks arriving out of order from
//      upstream ranks of different speeds could otherwise fill the limit with micro-batches none
//      of which can finish its forwards, and stall. This can exceed the limit by up to
//      v*k - 1 units per micro-batch held; it never happens in the homogeneous families;
//   5. else it waits for the next completion.
// (With forwards_first, the GPipe policy, 2 comes before 1 and a rank starts its backwards only
// once it has issued all its forwards.)
// It is the heuristic idea of the zero-bubble authors' greedy V scheduler (sail-sg/
// zero-bubble-pipeline-parallelism, zerobubble/scheduler/zbv_greedy.py) in plait's own, simpler
// form. The order it returns is a real execution, so it cannot deadlock when receives are posted
// ahead, whatever the real costs turn out to be. A unit is ready when its inputs are: F(i,j,s)
// after F(i,j,s-1) (plus the message time when another rank ran it) and F(i,j-1,s); B(i,j,s)
// after F(i,j,s), B(i,j,s+1) and B(i,j+1,s) (../shared/reference/schedules.md).
//
// The heterogeneous extensions (Zorse-style stages with several ranks of different speeds, each
// running its own subset of the micro-batches) are all optional: per-rank unit costs, message
// times between ranks, per-rank in-flight limits, and the rank that runs each micro-batch on
// each virtual stage (schedule/heterogeneous_pipeline.h computes that routing).
#include <cstdint>
#include <functional>
#include <vector>

#include "plait/schedule/schedule.h"

namespace plait::schedule {

struct ListSchedulerOptions {
  double forward_cost = 1.0;
  double backward_cost = 1.0;  // B, or BW's B part
  double weight_cost = 1.0;    // W, or BW's W part
  bool split_backward = true;
  int max_in_flight = 0;  // 0: unlimited

  // Seconds of one unit on `rank` (kind F, B or W; a fused BW costs B + W). Replaces the three
  // constants when set.
  std::function<double(int rank, ActionKind kind, std::int32_t segment, std::int32_t vstage)> unit_seconds;
  // Seconds from the end of a unit on src_rank until its output is usable on dst_rank (a
  // different rank); null: messages are free.
  std::function<double(int src_rank, int dst_rank, std::int32_t segment)> transfer_seconds;
  // In-flight limit per rank (0: unlimited); empty: max_in_flight for every rank.
  std::vector<int> rank_max_in_flight;
  // microbatch_rank[vstage][mb]: the rank that runs every unit of micro-batch mb on vstage (it must
  // hold the stage). Empty: every stage has exactly one rank, which runs all micro-batches.
  std::vector<std::vector<std::int32_t>> microbatch_rank;
  // GPipe: forwards before backwards, and no backward before the rank has issued all forwards.
  bool forwards_first = false;
  // A rank starts a micro-batch only when all its units of it (k per virtual stage it runs it on)
  // fit under the limit together with those still to come of the micro-batches it has started, so
  // the limit is never exceeded and rule 4 is never needed (ZB-V's memory bound, which its
  // authors' construction keeps strictly: zbv.py asserts mem <= max_mem).
  bool reserve_whole_microbatches = false;
};

// Throws plait::Error if the ranks stall (an in-flight limit too small for the layout) or the
// routing does not fit the layout.
Schedule list_schedule(const Layout& layout, const ListSchedulerOptions& options);

}  // namespace plait::schedule
