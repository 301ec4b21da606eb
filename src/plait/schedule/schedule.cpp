#include "plait/schedule/schedule.h"

#include <utility>

namespace plait::schedule {

std::int64_t Schedule::num_actions() const {
  std::int64_t n = 0;
  for (const auto& actions : ranks) n += static_cast<std::int64_t>(actions.size());
  return n;
}

Schedule empty_schedule(Layout layout) {
  Schedule schedule;
  schedule.ranks.resize(layout.num_ranks());
  schedule.layout = std::move(layout);
  return schedule;
}

}  // namespace plait::schedule
