#pragma once
// A schedule: the layout it assumes plus one ordered action list per rank. This one value is
// what generators produce, the validator checks, lowering turns into send/recv programs, the
// simulator times and the runtime executes; none of them knows which family produced it.
#include <cstdint>
#include <vector>

#include "plait/schedule/action.h"
#include "plait/schedule/layout.h"

namespace plait::schedule {

struct Schedule {
  Layout layout;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: rank r's actions in execution order

  int num_ranks() const { return static_cast<int>(ranks.size()); }
  std::int64_t num_actions() const;

  friend bool operator==(const Schedule&, const Schedule&) = default;
};

// An empty schedule over `layout` (one empty action list per rank).
Schedule empty_schedule(Layout layout);

}  // namespace plait::schedule
