#include "plait/schedule/chunk_uses.h"

namespace plait::schedule {

std::vector<ChunkUses> chunk_uses(const std::vector<Action>& actions, std::int32_t chunks) {
  std::vector<ChunkUses> uses(static_cast<std::size_t>(chunks));
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    ChunkUses& u = uses.at(static_cast<std::size_t>(a.chunk));
    const auto index = static_cast<std::int32_t>(i);
    if (u.first < 0) u.first = index;
    u.last = index;
    if (a.kind == ActionKind::W || a.kind == ActionKind::BW) {
      if (u.first_weight < 0) u.first_weight = index;
      u.last_weight = index;
    }
  }
  return uses;
}

}  // namespace plait::schedule
