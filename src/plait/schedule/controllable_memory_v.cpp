#include "plait/schedule/controllable_memory_v.h"

#include <algorithm>
#include <deque>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/layout.h"
#include "plait/schedule/list_scheduler.h"

namespace plait::schedule {

namespace {

// Rank r's actions in slot order: the blocks' F's and B's at their slots, then the W's in the
// free slots (controllable_memory_v.h).
std::vector<Action> block_rank(const PipelineShape& shape, BlockOffsets offsets, int r) {
  const int m = shape.microbatches, k = shape.segments, units = m * k;
  const std::array<int, 4> o = offsets(shape.stages, r);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < a; ++b) {
      if ((o[a] - o[b]) % 6 == 0) {
        throw Error("V building block: offsets " + std::to_string(o[b]) + " and " + std::to_string(o[a]) +
                    " of rank " + std::to_string(r) + " coincide mod 6");
      }
    }
  }
  const int last = *std::max_element(o.begin(), o.end()) + 6 * (units + k - 1);
  std::vector<Action> slots(static_cast<std::size_t>(last) + 1, Action{ActionKind::W, -1, 0, 0});
  for (int u = 0; u < units; ++u) {
    const int mb = u / k, fseg = u % k, bseg = k - 1 - u % k;
    const int fblock = 6 * u, bblock = 6 * (u + k - 1);
    slots[o[0] + fblock] = {ActionKind::F, mb, fseg, 0};
    slots[o[1] + fblock] = {ActionKind::F, mb, fseg, 1};
    slots[o[2] + bblock] = {ActionKind::B, mb, bseg, 1};
    slots[o[3] + bblock] = {ActionKind::B, mb, bseg, 0};
  }
  std::vector<Action> out;
  std::deque<Action> pending_w;
  for (const Action& a : slots) {
    if (a.microbatch >= 0) {
      out.push_back(a);
      if (a.kind == ActionKind::B) pending_w.push_back({ActionKind::W, a.microbatch, a.segment, a.chunk});
    } else if (!pending_w.empty()) {
      out.push_back(pending_w.front());
      pending_w.pop_front();
    }
  }
  out.insert(out.end(), pending_w.begin(), pending_w.end());
  return out;
}

}  // namespace

Schedule repeated_v_block(const PipelineShape& shape, BlockOffsets offsets) {
  Schedule schedule = empty_schedule(v_shape_layout(shape.stages, shape.microbatches, shape.segments));
  for (int r = 0; r < shape.stages; ++r) schedule.ranks[r] = block_rank(shape, offsets, r);
  return schedule;
}

int repeated_v_block_peak(const PipelineShape& shape, BlockOffsets offsets, int rank, bool before_w) {
  // The peak is the steady state's once the block repeats: a unit lives at most about p + k + 1
  // blocks (the offsets span under 6p + 4 slots, the backwards come k - 1 blocks late), so more
  // than 2p + 2k + 4 micro-batches add nothing (checked against the full order for m <= 64 in
  // tests/schedule/family_policy_test.cpp); counting at most that many keeps this O(p + k) for the
  // planner, which asks it for hundreds of micro-batches.
  PipelineShape steady = shape;
  steady.microbatches = std::min(shape.microbatches, 2 * shape.stages + 2 * shape.segments + 4);
  int held = 0, peak = 0;
  for (const Action& a : block_rank(steady, offsets, rank)) {
    held += a.kind == ActionKind::F ? 1 : a.kind == (before_w ? ActionKind::W : ActionKind::B) ? -1 : 0;
    peak = std::max(peak, held);
  }
  return peak;
}

Schedule repeated_v_block_for_costs(const PipelineShape& shape, BlockOffsets offsets, const UnitCosts& costs) {
  if (!costs.unit_seconds) return repeated_v_block(shape, offsets);
  ListSchedulerOptions options;
  options.split_backward = true;
  for (int r = 0; r < shape.stages; ++r) options.rank_max_in_flight.push_back(repeated_v_block_peak(shape, offsets, r, true));
  options.unit_seconds = costs.unit_seconds;
  options.transfer_seconds = costs.transfer_seconds;
  options.reserve_whole_microbatches = true;
  return list_schedule(v_shape_layout(shape.stages, shape.microbatches, shape.segments), options);
}

}  // namespace plait::schedule
