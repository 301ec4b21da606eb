#pragma once
// One rank's part of a lowered schedule, resolved once before training: for every compute action
// in order, where its input comes from (a message to receive, or a buffer this rank produced
// itself, as at the turn of a V layout) and where its output goes (a message to send, or a
// local hand-off); which receives to post before it; and the action after which each chunk's
// gradients are final (its last W or BW), so their reduction can start. Nothing here knows which
// schedule family produced the actions: it reads the lowered program (schedule/lowering.h).
#include <cstdint>
#include <vector>

#include "plait/runtime/pipeline_plan.h"
#include "plait/schedule/lowering.h"

namespace plait::runtime {

struct ComputeStep {
  schedule::Action action;
  std::int32_t vstage = 0;
  // Input: the activation (F on a stage > 0) or output gradient (B/BW below the last stage).
  std::int32_t input_message = -1;  // message id to receive, or -1
  std::int64_t input_local = -1;    // tag of a local hand-off, or -1
  // Output: the activation (F below the last stage) or input gradient (B/BW above stage 0).
  std::int32_t output_message = -1;
  std::int64_t output_local = -1;
  // Elements (floats) of the input and output tensors (batch * segment length * hidden).
  std::int64_t input_elements = 0;
  std::int64_t output_elements = 0;
  // This chunk's last weight-gradient action on the rank: its gradients are final afterwards.
  bool finishes_chunk = false;
  // This chunk's first action on the rank (its weights must be gathered at ZeRO level 3), its
  // first weight-gradient action (its gradient buffer is committed at level 2) and its last
  // action of any kind (level 3 releases its weights after it), schedule::chunk_uses.
  bool first_use = false;
  bool first_weight = false;
  bool last_use = false;
  // Chunks whose level-3 gathers start before this action (the prefetch, one action ahead).
  std::vector<std::int32_t> prefetch;
};

struct RankProgram {
  int rank = 0;
  std::vector<ComputeStep> steps;
  // posts[i]: receives (message ids) to post before compute step i; posts.size() == steps.size().
  std::vector<std::vector<std::int32_t>> posts;
  // Messages this rank sends or receives (index = message id in the lowered schedule).
  const schedule::LoweredSchedule* lowered = nullptr;
};

// Lowers plan.schedule with receives posted `recv_lookahead` compute actions ahead (see
// schedule::LowerOptions) and message sizes in floats; the result is shared by all ranks.
schedule::LoweredSchedule lower_plan(const PipelinePlan& plan, std::int32_t recv_lookahead);

// Throws plait::Error if a message tag exceeds `max_tag` (the transport's limit).
RankProgram make_rank_program(const PipelinePlan& plan, const schedule::LoweredSchedule& lowered,
                              int rank, std::int64_t max_tag);

}  // namespace plait::runtime
