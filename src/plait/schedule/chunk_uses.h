#pragma once
// When a rank's action list uses each of its chunks, as the sharded runtime and the simulator's
// memory replay both need it: ZeRO-3 gathers a chunk's weights once per step, one compute action
// before its first use (the prefetch), holds them until its last use and then releases them;
// ZeRO-2 commits a chunk's gradient buffer at its first weight-gradient action (W or BW) and
// reduce-scatters it after the last. One function, so the runtime and the prediction agree.
#include <cstdint>
#include <vector>

#include "plait/schedule/action.h"

namespace plait::schedule {

struct ChunkUses {
  // Indices into the rank's action list; -1 when the chunk has no such action.
  std::int32_t first = -1, last = -1;                // any action of the chunk
  std::int32_t first_weight = -1, last_weight = -1;  // W or BW
  // The action before which the chunk's gather starts: first - 1 (overlapping that action),
  // or 0 (at the step's start) when the chunk is used first.
  std::int32_t prefetch() const { return first > 0 ? first - 1 : 0; }
};

// One entry per chunk (0 .. chunks-1) of `actions`.
std::vector<ChunkUses> chunk_uses(const std::vector<Action>& actions, std::int32_t chunks);

}  // namespace plait::schedule
