#pragma once
// Executes a lowered schedule without time, under blocking point-to-point semantics, to find
// out whether it can deadlock: each rank runs its program in order; a receive completes once its
// message has been sent; a send completes once the matching receive has been posted (the
// receiving rank has reached the receive's post position, Message::post_op). With receives
// posted ahead (the runtime's plan), sends never wait and only a cycle of receives can hang;
// with receives posted at use (recv_lookahead = 0), sends rendezvous like MPI_Ssend.
#include <cstdint>
#include <vector>

#include "plait/schedule/lowering.h"

namespace plait::schedule {

struct BlockedRank {
  std::int32_t rank;
  std::int32_t op;       // index of the blocking op in the rank's program
  std::int32_t message;  // the message it waits on
};

struct BlockingOutcome {
  bool completed = true;
  // When not completed: every rank that could not finish, in rank order.
  std::vector<BlockedRank> blocked;
};

BlockingOutcome execute_blocking(const LoweredSchedule& lowered);

}  // namespace plait::schedule
