#include "plait/schedule/lazy_gathers.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "plait/schedule/blocking_execution.h"
#include "plait/schedule/chunk_uses.h"

namespace plait::schedule {

bool lazy_gathers_deadlock_free(const Schedule& schedule, const LoweredSchedule& lowered,
                                const std::vector<bool>& gathered) {
  const Layout& layout = schedule.layout;
  const int ranks = schedule.num_ranks();
  // Per rank: (action index, peer, stage) of the synthetic sends before an action and receives
  // before its compute.
  std::vector<std::vector<std::tuple<std::int32_t, int, int>>> sends(static_cast<std::size_t>(ranks)),
      receives(static_cast<std::size_t>(ranks));
  bool any = false;
  for (int v = 0; v < layout.num_vstages; ++v) {
    if (!gathered.at(static_cast<std::size_t>(v))) continue;
    std::vector<int> holders;
    std::vector<ChunkUses> uses;
    for (int r = 0; r < ranks; ++r) {
      const auto& stages = layout.rank_vstages[static_cast<std::size_t>(r)];
      const auto it = std::find(stages.begin(), stages.end(), v);
      if (it == stages.end()) continue;
      holders.push_back(r);
      uses.push_back(chunk_uses(schedule.ranks[static_cast<std::size_t>(r)],
                                layout.num_chunks(r))[static_cast<std::size_t>(it - stages.begin())]);
    }
    for (std::size_t a = 0; a < holders.size(); ++a) {
      for (std::size_t b = 0; b < holders.size(); ++b) {
        if (a == b || uses[a].first < 0 || uses[b].first < 0) continue;
        any = true;
        sends[static_cast<std::size_t>(holders[a])].push_back({uses[a].prefetch(), holders[b], v});
        receives[static_cast<std::size_t>(holders[b])].push_back({uses[b].first, holders[a], v});
      }
    }
  }
  if (!any) return true;

  LoweredSchedule augmented;
  augmented.num_segments = lowered.num_segments;
  augmented.num_vstages = lowered.num_vstages;
  augmented.messages = lowered.messages;
  augmented.programs.resize(static_cast<std::size_t>(ranks));
  // One synthetic message per (sender, receiver, stage): the sender's start of that stage's
  // gather to the receiver's wait for it.
  std::map<std::tuple<int, int, int>, std::int32_t> synthetic;
  auto message_for = [&](int src, int dst, int vstage) -> std::int32_t {
    auto [it, fresh] = synthetic.try_emplace({src, dst, vstage}, static_cast<std::int32_t>(augmented.messages.size()));
    if (fresh) {
      Message m{};
      m.src_rank = src;
      m.dst_rank = dst;
      m.tag = -1;
      augmented.messages.push_back(m);
    }
    return it->second;
  };
  for (int r = 0; r < ranks; ++r) {
    const auto& ops = lowered.programs[static_cast<std::size_t>(r)];
    auto& out = augmented.programs[static_cast<std::size_t>(r)];
    // The first op of each action's group (its receives, or the compute itself).
    std::int32_t group_start_action = -1;
    bool at_group_start = true;
    auto emit_sends = [&](std::int32_t action) {
      for (const auto& [a, peer, v] : sends[static_cast<std::size_t>(r)]) {
        if (a != action) continue;
        const std::int32_t id = message_for(r, peer, v);
        out.push_back({OpKind::send, id});
      }
    };
    std::int32_t next_action = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op op = ops[i];
      if (at_group_start && op.kind != OpKind::send) {
        // A new action's group begins here (its receives, then its compute).
        group_start_action = next_action;
        emit_sends(group_start_action);
        at_group_start = false;
      }
      if (op.kind == OpKind::compute) {
        for (const auto& [a, peer, v] : receives[static_cast<std::size_t>(r)]) {
          if (a != op.index) continue;
          const std::int32_t id = message_for(peer, r, v);
          out.push_back({OpKind::recv, id});
        }
        ++next_action;
        at_group_start = true;
      }
      out.push_back(op);
    }
  }
  // The executor never waits on a send (nonblocking, completed lazily) and a gather's start
  // never waits either, so every receive counts as posted from the start: only cycles of waits
  // for messages and gathers can hang, which is what execute_blocking then finds.
  for (Message& m : augmented.messages) m.post_op = 0;
  return execute_blocking(augmented).completed;
}

}  // namespace plait::schedule
