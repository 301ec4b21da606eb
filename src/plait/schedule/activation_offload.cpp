#include "plait/schedule/activation_offload.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace plait::schedule {

std::vector<UnitOffload> activation_offloads(const std::vector<Action>& actions,
                                             const std::vector<bool>& chunk_offloads) {
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::int32_t> forward_at;
  std::vector<UnitOffload> units;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    const auto c = static_cast<std::size_t>(a.chunk);
    if (c >= chunk_offloads.size() || !chunk_offloads[c]) continue;
    const auto key = std::make_tuple(a.chunk, a.microbatch, a.segment);
    if (a.kind == ActionKind::F) {
      forward_at[key] = static_cast<std::int32_t>(i);
      continue;
    }
    if (!is_backward_input(a.kind)) continue;
    const auto it = forward_at.find(key);
    if (it == forward_at.end()) continue;  // validate() reports a B without its F
    const std::int32_t f = it->second, b = static_cast<std::int32_t>(i);
    if (b - 1 > f + 2) units.push_back({a.chunk, a.microbatch, a.segment, f, f + 2, b - 1, b});
  }
  std::sort(units.begin(), units.end(), [](const UnitOffload& x, const UnitOffload& y) { return x.forward < y.forward; });
  return units;
}

OffloadPoints offload_points(const std::vector<UnitOffload>& units, std::size_t actions) {
  OffloadPoints p;
  p.release.resize(actions);
  p.prefetch.resize(actions);
  p.after_forward.assign(actions, -1);
  p.before_backward.assign(actions, -1);
  for (std::size_t u = 0; u < units.size(); ++u) {
    const UnitOffload& x = units[u];
    const auto id = static_cast<std::int32_t>(u);
    p.after_forward[static_cast<std::size_t>(x.forward)] = id;
    p.release[static_cast<std::size_t>(x.release)].push_back(id);
    p.prefetch[static_cast<std::size_t>(x.prefetch)].push_back(id);
    p.before_backward[static_cast<std::size_t>(x.backward)] = id;
  }
  return p;
}

}  // namespace plait::schedule
