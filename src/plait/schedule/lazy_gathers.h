#pragma once
// Whether ZeRO-3's gathers can start lazily without a deadlock. A stage's gather is a collective
// among its holders: each starts it one compute action before its first use of the stage
// (ChunkUses::prefetch) and waits for it before that use, so a holder's first use depends on
// every other holder having reached its prefetch point. Added to the pipeline's messages, that
// may close a cycle in an explicit heterogeneous schedule (tests/runtime/rank_program_test.cpp
// builds one). The check runs the lowered schedule with each gather as messages from every
// holder's prefetch point to every other holder's first use, under execute_blocking's semantics
// with every receive posted at the start (the executor never waits on a send, nor on starting
// a gather): true when every rank finishes. When it does not, gathers start at the step's start,
// which cannot deadlock (no rank waits before starting them). The runtime and the simulator's
// memory replay both ask it, so they open the same windows.
#include <vector>

#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule.h"

namespace plait::schedule {

// gathered[v]: virtual stage v's weights are gathered per step (ZeRO level 3).
bool lazy_gathers_deadlock_free(const Schedule& schedule, const LoweredSchedule& lowered,
                                const std::vector<bool>& gathered);

}  // namespace plait::schedule
