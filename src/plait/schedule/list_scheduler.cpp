#include "plait/schedule/list_scheduler.h"

#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "plait/core/error.h"
#include "plait/schedule/one_f_one_b_pattern.h"

namespace plait::schedule {

Schedule list_schedule(const Layout& layout, const ListSchedulerOptions& options) {
  check_layout(layout);
  const int ranks = layout.num_ranks();
  const int m = layout.num_microbatches, k = layout.num_segments, V = layout.num_vstages;
  const std::vector<Action> forward_order = sequence_forward_order(m, k, 0);
  const std::vector<Action> backward_order = sequence_backward_order(m, k, 0);
  const std::size_t per_chunk = forward_order.size();
  auto unit = [&](int mb, int seg, int s) {
    return (static_cast<std::size_t>(mb) * k + seg) * V + s;
  };
  const std::size_t units = static_cast<std::size_t>(m) * k * V;
  std::vector<double> f_end(units, -1.0), b_end(units, -1.0);

  struct RankState {
    std::vector<std::size_t> next_f, next_b;  // per chunk, into the unit orders
    std::deque<Action> pending_w;
    double free = 0.0;
    int in_flight = 0;
    std::size_t remaining = 0;
  };
  std::vector<RankState> state(ranks);
  std::size_t remaining = 0;
  Schedule schedule = empty_schedule(layout);
  for (int r = 0; r < ranks; ++r) {
    state[r].next_f.assign(layout.num_chunks(r), 0);
    state[r].next_b.assign(layout.num_chunks(r), 0);
    state[r].remaining = per_chunk * layout.num_chunks(r) * (options.split_backward ? 3 : 2);
    remaining += state[r].remaining;
  }

  // Completion time of the inputs of a forward / backward, or -1 if one is not yet scheduled.
  auto forward_ready = [&](int mb, int seg, int s) {
    double t = 0.0;
    if (s > 0) {
      const double e = f_end[unit(mb, seg, s - 1)];
      if (e < 0) return -1.0;
      t = std::max(t, e);
    }
    if (seg > 0) {
      const double e = f_end[unit(mb, seg - 1, s)];
      if (e < 0) return -1.0;
      t = std::max(t, e);
    }
    return t;
  };
  auto backward_ready = [&](int mb, int seg, int s) {
    double t = f_end[unit(mb, seg, s)];
    if (t < 0) return -1.0;
    if (s + 1 < V) {
      const double e = b_end[unit(mb, seg, s + 1)];
      if (e < 0) return -1.0;
      t = std::max(t, e);
    }
    if (seg + 1 < k) {
      const double e = b_end[unit(mb, seg + 1, s)];
      if (e < 0) return -1.0;
      t = std::max(t, e);
    }
    return t;
  };

  // The chunk of rank r whose next unit in `order` is ready by `now`, the best by `better`
  // (which compares two candidates' actions and stages), or -1.
  auto pick = [&](int r, double now, const std::vector<std::size_t>& next,
                  const std::vector<Action>& order, const auto& ready, const auto& better) {
    int best = -1;
    for (int c = 0; c < layout.num_chunks(r); ++c) {
      if (next[c] >= per_chunk) continue;
      const Action& a = order[next[c]];
      const double t = ready(a.microbatch, a.segment, layout.vstage(r, c));
      if (t < 0 || t > now) continue;
      if (best < 0 || better(a, layout.vstage(r, c), order[next[best]], layout.vstage(r, best))) best = c;
    }
    return best;
  };

  std::priority_queue<double, std::vector<double>, std::greater<>> events;
  events.push(0.0);
  while (remaining > 0) {
    if (events.empty()) {
      throw Error("list scheduler: the ranks stalled with " + std::to_string(remaining) +
                  " actions left (max_in_flight " + std::to_string(options.max_in_flight) +
                  " is too small for this layout)");
    }
    const double now = events.top();
    while (!events.empty() && events.top() <= now) events.pop();
    for (int r = 0; r < ranks; ++r) {
      RankState& st = state[r];
      if (st.remaining == 0 || st.free > now) continue;
      // 1. A ready backward: oldest micro-batch, then deepest stage.
      int best_chunk = pick(r, now, st.next_b, backward_order, backward_ready,
                            [](const Action& a, int sa, const Action& b, int sb) {
                              return a.microbatch < b.microbatch || (a.microbatch == b.microbatch && sa > sb);
                            });
      Action chosen;
      double cost = 0.0;
      if (best_chunk >= 0) {
        chosen = backward_order[st.next_b[best_chunk]++];
        chosen.chunk = best_chunk;
        const int s = layout.vstage(r, best_chunk);
        if (options.split_backward) {
          chosen.kind = ActionKind::B;
          cost = options.backward_cost;
          st.pending_w.push_back(Action{ActionKind::W, chosen.microbatch, chosen.segment, best_chunk});
        } else {
          chosen.kind = ActionKind::BW;
          cost = options.backward_cost + options.weight_cost;
          --st.in_flight;
        }
        b_end[unit(chosen.microbatch, chosen.segment, s)] = now + cost;
      } else {
        // 2. A ready forward within the memory limit: deepest stage, then oldest micro-batch.
        if (options.max_in_flight <= 0 || st.in_flight < options.max_in_flight) {
          best_chunk = pick(r, now, st.next_f, forward_order, forward_ready,
                            [](const Action& a, int sa, const Action& b, int sb) {
                              return sa > sb || (sa == sb && a.microbatch < b.microbatch);
                            });
        }
        if (best_chunk >= 0) {
          chosen = forward_order[st.next_f[best_chunk]++];
          chosen.chunk = best_chunk;
          cost = options.forward_cost;
          ++st.in_flight;
          f_end[unit(chosen.microbatch, chosen.segment, layout.vstage(r, best_chunk))] = now + cost;
        } else if (!st.pending_w.empty()) {
          // 3. Fill the gap with the oldest weight gradient.
          chosen = st.pending_w.front();
          st.pending_w.pop_front();
          cost = options.weight_cost;
          --st.in_flight;
        } else {
          continue;  // 4. wait
        }
      }
      schedule.ranks[r].push_back(chosen);
      const std::size_t done = chosen.kind == ActionKind::BW ? 2 : 1;
      st.remaining -= done;
      remaining -= done;
      st.free = now + cost;
      events.push(st.free);
    }
  }
  return schedule;
}

}  // namespace plait::schedule
