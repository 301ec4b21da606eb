#include "plait/schedule/blocking_execution.h"

namespace plait::schedule {

BlockingOutcome execute_blocking(const LoweredSchedule& lowered) {
  const int ranks = static_cast<int>(lowered.programs.size());
  const std::size_t messages = lowered.messages.size();
  std::vector<char> sent(messages, 0), posted(messages, 0);
  std::vector<std::int32_t> pc(ranks, 0), waiting_on(ranks, -1);
  // Each rank's receives in program order; their post positions never decrease along it.
  std::vector<std::vector<std::int32_t>> receives(ranks);
  std::vector<std::size_t> next_post(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    for (const Op& op : lowered.programs[r]) {
      if (op.kind == OpKind::recv) receives[r].push_back(op.index);
    }
  }
  std::vector<std::int32_t> work;
  work.reserve(ranks);
  for (int r = ranks - 1; r >= 0; --r) work.push_back(r);
  auto wake = [&](std::int32_t r, std::int32_t message) {
    if (waiting_on[r] == message) {
      waiting_on[r] = -1;
      work.push_back(r);
    }
  };
  while (!work.empty()) {
    const std::int32_t r = work.back();
    work.pop_back();
    const auto& program = lowered.programs[r];
    while (true) {
      while (next_post[r] < receives[r].size() &&
             lowered.messages[receives[r][next_post[r]]].post_op <= pc[r]) {
        const std::int32_t id = receives[r][next_post[r]++];
        posted[id] = 1;
        wake(lowered.messages[id].src_rank, id);
      }
      if (pc[r] == static_cast<std::int32_t>(program.size())) break;
      const Op op = program[pc[r]];
      if (op.kind == OpKind::send) {
        if (!posted[op.index]) {
          waiting_on[r] = op.index;
          break;
        }
        sent[op.index] = 1;
        wake(lowered.messages[op.index].dst_rank, op.index);
      } else if (op.kind == OpKind::recv) {
        if (!sent[op.index]) {
          waiting_on[r] = op.index;
          break;
        }
      }
      ++pc[r];
    }
  }
  BlockingOutcome outcome;
  for (int r = 0; r < ranks; ++r) {
    if (pc[r] < static_cast<std::int32_t>(lowered.programs[r].size())) {
      outcome.completed = false;
      outcome.blocked.push_back({r, pc[r], waiting_on[r]});
    }
  }
  return outcome;
}

}  // namespace plait::schedule
