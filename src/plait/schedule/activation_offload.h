#pragma once
// Where a rank's activation offload happens in its action order (issue 25 part 3; PipeOffload,
// Wan et al. 2025, which offloads a unit's activations between its F and its B): the one table
// the runtime (runtime/activation_offload.h) executes and the simulator (sim/event_simulator.h)
// and memory prediction replay, so all three move the same units at the same points.
//
// A unit (micro-batch, segment) on an offloading chunk, F at action index f and B (or BW) at b:
//   after action f          its saved activations are submitted to the copy engine, device to
//                           host (they stay charged to the device until `release`);
//   before action f + 2     the copy must be done (waiting if not) and the device bytes go:
//                           the copy overlaps the whole next action;
//   before action b - 1     the copy back is submitted and the device bytes are taken again:
//                           it overlaps the action before the B;
//   before action b         the copy back must be done (the B waits for it if not).
// So a unit moves when it would be away for at least one action: b - 1 > f + 2. What moves:
// everything F left for B and W (spec::UnitMemory::forward_activations) and, for a
// micro-batch's last segment (every unit without segments), its K/V (forward_kv). An earlier
// segment's K/V stays (later segments of the micro-batch attend to it in their F, and add dK/dV
// in their B, which run before its own), and what W needs after B stays (B -> W is short in every family; moving it would cost two more
// copies for the W-bubble gap only). With recomputation only the checkpointed inputs exist
// after F, so only they move (spec::UnitMemory::forward_activations in both cases).
#include <cstdint>
#include <vector>

#include "plait/schedule/action.h"

namespace plait::schedule {

// The most units an offloading rank holds on its device at once, whatever the schedule: at action
// t a unit that moves is on the device only while its F is t - 1 or t or its B is t or t + 1,
// and one that does not move lives at most four actions (its F in t - 3 .. t); every such unit
// owns a distinct action of t - 3 .. t + 1 (its F or its B). The planner's bound; the simulator
// replays the exact table.
inline constexpr int kOffloadResidentUnits = 5;

struct UnitOffload {
  std::int32_t chunk = 0, microbatch = 0, segment = 0;
  std::int32_t forward = 0;   // its F's index in the rank's actions (the copy out after it)
  std::int32_t release = 0;   // forward + 2: the copy out done, the device bytes freed before it
  std::int32_t prefetch = 0;  // backward - 1: the copy back submitted before it
  std::int32_t backward = 0;  // its B or BW: waits for the copy back
};

// The units of one rank's actions that move, in F order; `chunk_offloads[c]`: whether chunk c's
// stage offloads its activations (parallel.offload "activations" or "all").
std::vector<UnitOffload> activation_offloads(const std::vector<Action>& actions,
                                             const std::vector<bool>& chunk_offloads);

// The same per action index (size actions.size()): which units (indices into `units`) release
// or prefetch before it, and which unit's F or B it is (-1: none).
struct OffloadPoints {
  std::vector<std::vector<std::int32_t>> release, prefetch;
  std::vector<std::int32_t> after_forward, before_backward;
};
OffloadPoints offload_points(const std::vector<UnitOffload>& units, std::size_t actions);

}  // namespace plait::schedule
