#include "plait/schedule/list_scheduler.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <queue>
#include <map>
#include <string>
#include <vector>

#include "plait/core/error.h"

namespace plait::schedule {

namespace {

// A unit becomes ready on its rank (kind F or B), or a rank becomes free.
struct Event {
  double time;
  std::uint64_t order;  // insertion order: equal times stay deterministic
  std::int32_t rank;
  std::int8_t ready_kind;  // -1: the rank is free; 0: F ready; 1: B ready
  std::int64_t unit;
};
struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    return a.time > b.time || (a.time == b.time && a.order > b.order);
  }
};

// Ready units of one rank, smallest key first. Backward keys put the oldest micro-batch first,
// then the deepest stage; forward keys the deepest stage first, then the oldest micro-batch.
using ReadyQueue = std::priority_queue<std::pair<std::uint64_t, std::int64_t>,
                                       std::vector<std::pair<std::uint64_t, std::int64_t>>,
                                       std::greater<>>;

struct RankState {
  int rank = 0;
  ReadyQueue ready_f, ready_b;
  std::deque<Action> pending_w;
  // Units in flight per micro-batch on this rank (micro-batches it has started and not finished).
  std::map<std::int32_t, int> holding;
  double free = 0.0;
  int in_flight = 0;
  int limit = 0;  // 0: unlimited
  std::int64_t remaining = 0;
  std::int64_t forwards_left = 0;
};

}  // namespace

Schedule list_schedule(const Layout& layout, const ListSchedulerOptions& options) {
  check_layout(layout);
  const int ranks = layout.num_ranks();
  const std::int32_t m = layout.num_microbatches, k = layout.num_segments, V = layout.num_vstages;
  if (V >= (1 << 16) || k >= (1 << 16) || m >= (1 << 28)) {
    throw Error("list scheduler: layout too large (stages < 65536, segments < 65536, micro-batches < 2^28)");
  }
  auto unit_of = [&](std::int32_t mb, std::int32_t seg, std::int32_t s) {
    return (std::int64_t{s} * m + mb) * k + seg;
  };

  // Who runs each (virtual stage, micro-batch), and as which of its chunks.
  std::vector<std::int32_t> owner(static_cast<std::size_t>(V) * m, -1);
  if (options.microbatch_rank.empty()) {
    std::vector<std::int32_t> holder(V, -1);
    for (int r = 0; r < ranks; ++r) {
      for (std::int32_t s : layout.rank_vstages[r]) {
        if (holder[s] >= 0) {
          throw Error("list scheduler: virtual stage " + std::to_string(s) + " is held by ranks " +
                      std::to_string(holder[s]) + " and " + std::to_string(r) +
                      "; give microbatch_rank to say which rank runs which micro-batch");
        }
        holder[s] = r;
      }
    }
    for (std::int32_t s = 0; s < V; ++s) std::fill_n(&owner[static_cast<std::size_t>(s) * m], m, holder[s]);
  } else {
    if (static_cast<std::int32_t>(options.microbatch_rank.size()) != V) {
      throw Error("list scheduler: microbatch_rank has " + std::to_string(options.microbatch_rank.size()) +
                  " stages, the layout " + std::to_string(V));
    }
    for (std::int32_t s = 0; s < V; ++s) {
      const auto& row = options.microbatch_rank[s];
      if (static_cast<std::int32_t>(row.size()) != m) {
        throw Error("list scheduler: microbatch_rank[" + std::to_string(s) + "] has " +
                    std::to_string(row.size()) + " micro-batches, the layout " + std::to_string(m));
      }
      for (std::int32_t mb = 0; mb < m; ++mb) {
        const std::int32_t r = row[mb];
        const bool holds = r >= 0 && r < ranks &&
                           std::find(layout.rank_vstages[r].begin(), layout.rank_vstages[r].end(), s) !=
                               layout.rank_vstages[r].end();
        if (!holds) {
          throw Error("list scheduler: micro-batch " + std::to_string(mb) + " of virtual stage " +
                      std::to_string(s) + " is routed to rank " + std::to_string(r) +
                      ", which does not hold that stage");
        }
        owner[static_cast<std::size_t>(s) * m + mb] = r;
      }
    }
  }
  auto owner_of = [&](std::int32_t s, std::int32_t mb) { return owner[static_cast<std::size_t>(s) * m + mb]; };
  auto chunk_of = [&](int r, std::int32_t s) {
    const auto& v = layout.rank_vstages[r];
    return static_cast<std::int32_t>(std::find(v.begin(), v.end(), s) - v.begin());
  };

  auto cost = [&](int r, ActionKind kind, std::int32_t seg, std::int32_t s) {
    if (options.unit_seconds) {
      if (kind == ActionKind::BW) {
        return options.unit_seconds(r, ActionKind::B, seg, s) + options.unit_seconds(r, ActionKind::W, seg, s);
      }
      return options.unit_seconds(r, kind, seg, s);
    }
    switch (kind) {
      case ActionKind::F: return options.forward_cost;
      case ActionKind::B: return options.backward_cost;
      case ActionKind::W: return options.weight_cost;
      case ActionKind::BW: return options.backward_cost + options.weight_cost;
    }
    return 0.0;
  };

  std::vector<RankState> state(ranks);
  const int actions_per_unit = options.split_backward ? 3 : 2;
  std::int64_t remaining = 0;
  for (int r = 0; r < ranks; ++r) {
    state[r].rank = r;
    state[r].limit = options.rank_max_in_flight.empty()
                         ? options.max_in_flight
                         : options.rank_max_in_flight.at(static_cast<std::size_t>(r));
  }
  for (std::int32_t s = 0; s < V; ++s) {
    for (std::int32_t mb = 0; mb < m; ++mb) {
      RankState& st = state[owner_of(s, mb)];
      st.remaining += std::int64_t{k} * actions_per_unit;
      st.forwards_left += k;
      remaining += std::int64_t{k} * actions_per_unit;
    }
  }

  // Unmet inputs and the time the last one arrives, per unit, for F and B.
  const std::size_t units = static_cast<std::size_t>(layout.num_units());
  std::vector<std::uint8_t> deps[2] = {std::vector<std::uint8_t>(units), std::vector<std::uint8_t>(units)};
  std::vector<double> ready_at[2] = {std::vector<double>(units, 0.0), std::vector<double>(units, 0.0)};
  std::priority_queue<Event, std::vector<Event>, EventLater> events;
  std::uint64_t order = 0;
  for (std::int32_t s = 0; s < V; ++s) {
    for (std::int32_t mb = 0; mb < m; ++mb) {
      for (std::int32_t seg = 0; seg < k; ++seg) {
        const std::int64_t u = unit_of(mb, seg, s);
        deps[0][u] = static_cast<std::uint8_t>((s > 0) + (seg > 0));
        deps[1][u] = static_cast<std::uint8_t>(1 + (s + 1 < V) + (seg + 1 < k));
        if (deps[0][u] == 0) events.push({0.0, order++, owner_of(s, mb), 0, u});
      }
    }
  }
  // One input of (kind, unit) on rank `to` is produced on rank `from` at `end`.
  auto satisfy = [&](int kind, std::int32_t mb, std::int32_t seg, std::int32_t s, int from, double end) {
    const std::int64_t u = unit_of(mb, seg, s);
    const int to = owner_of(s, mb);
    double t = end;
    if (to != from && options.transfer_seconds) t += options.transfer_seconds(from, to, seg);
    ready_at[kind][u] = std::max(ready_at[kind][u], t);
    if (--deps[kind][u] == 0) events.push({ready_at[kind][u], order++, to, static_cast<std::int8_t>(kind), u});
  };
  auto decode = [&](std::int64_t u, std::int32_t& mb, std::int32_t& seg, std::int32_t& s) {
    seg = static_cast<std::int32_t>(u % k);
    mb = static_cast<std::int32_t>((u / k) % m);
    s = static_cast<std::int32_t>(u / (std::int64_t{k} * m));
  };

  // The forward a rank may start now, or -1. Below its in-flight limit: the best ready one.
  // At the limit: the best ready forward of a micro-batch the rank already holds (its next
  // segment, or its next chunk), never a new micro-batch. Without that, segments or chunks
  // arriving out of order (from upstream ranks of different speeds) could fill the limit with
  // micro-batches none of which can finish its forwards and come back as a backward; with it,
  // a micro-batch once started on a rank always gets through it, so the ranks cannot stall.
  // (This second kind comes after pending W's, which free memory themselves.)
  std::vector<std::uint8_t> f_issued(units, 0), f_ready(units, 0);
  std::vector<std::uint16_t> forwarded(static_cast<std::size_t>(V) * m, 0);
  auto forward_key = [&](std::int32_t mb, std::int32_t seg, std::int32_t s) {
    return (static_cast<std::uint64_t>(V - 1 - s) << 44) | (static_cast<std::uint64_t>(mb) << 16) |
           static_cast<std::uint64_t>(seg);
  };
  auto release = [](RankState& st, std::int32_t mb) {
    auto it = st.holding.find(mb);
    if (--it->second == 0) st.holding.erase(it);
  };
  auto pick_forward = [&](RankState& st, bool at_limit) -> std::int64_t {
    while (!st.ready_f.empty() && f_issued[st.ready_f.top().second]) st.ready_f.pop();
    if (!at_limit) {
      if (st.ready_f.empty()) return -1;
      const std::int64_t u = st.ready_f.top().second;
      st.ready_f.pop();
      return u;
    }
    std::int64_t best = -1;
    std::uint64_t best_key = 0;
    for (const auto& held : st.holding) {
      const std::int32_t mb = held.first;
      for (std::int32_t s : layout.rank_vstages[st.rank]) {
        const std::int32_t seg = forwarded[static_cast<std::size_t>(s) * m + mb];
        if (seg >= k) continue;
        const std::int64_t u = unit_of(mb, seg, s);
        if (!f_ready[u] || f_issued[u]) continue;
        const std::uint64_t key = forward_key(mb, seg, s);
        if (best < 0 || key < best_key) best = u, best_key = key;
      }
    }
    return best;
  };

  Schedule schedule = empty_schedule(layout);
  std::vector<int> woken;
  while (remaining > 0) {
    if (events.empty()) {
      for (int r = 0; r < ranks; ++r) {
        if (state[r].remaining == 0) continue;
        throw Error("list scheduler: the ranks stalled with " + std::to_string(remaining) +
                    " actions left; rank " + std::to_string(r) + " has " +
                    std::to_string(state[r].remaining) + " left with " +
                    std::to_string(state[r].in_flight) + " units in flight (limit " +
                    std::to_string(state[r].limit) + ", too small for this layout)");
      }
    }
    const double now = events.top().time;
    woken.clear();
    while (!events.empty() && events.top().time <= now) {
      const Event e = events.top();
      events.pop();
      woken.push_back(e.rank);
      if (e.ready_kind < 0) continue;
      std::int32_t mb, seg, s;
      decode(e.unit, mb, seg, s);
      const std::uint64_t deep = static_cast<std::uint64_t>(V - 1 - s);
      if (e.ready_kind == 0) {
        f_ready[e.unit] = 1;
        state[e.rank].ready_f.push({forward_key(mb, seg, s), e.unit});
      } else {
        state[e.rank].ready_b.push({(static_cast<std::uint64_t>(mb) << 32) | (deep << 16) | static_cast<std::uint64_t>(k - 1 - seg), e.unit});
      }
    }
    std::sort(woken.begin(), woken.end());
    woken.erase(std::unique(woken.begin(), woken.end()), woken.end());
    for (int r : woken) {
      RankState& st = state[r];
      if (st.remaining == 0 || st.free > now) continue;
      const bool may_backward = !st.ready_b.empty() && (!options.forwards_first || st.forwards_left == 0);
      const bool at_limit = st.limit > 0 && st.in_flight >= st.limit;
      std::int64_t forward_unit = -1;
      if ((options.forwards_first || !may_backward) && !at_limit) forward_unit = pick_forward(st, false);
      int choice;  // 0: F, 1: B/BW, 2: W
      if (options.forwards_first) {
        choice = forward_unit >= 0 ? 0 : may_backward ? 1 : !st.pending_w.empty() ? 2 : -1;
      } else {
        choice = may_backward ? 1 : forward_unit >= 0 ? 0 : !st.pending_w.empty() ? 2 : -1;
      }
      if (choice < 0 && at_limit && (forward_unit = pick_forward(st, true)) >= 0) choice = 0;
      if (choice < 0) continue;  // wait
      Action chosen;
      double end = now;
      if (choice == 2) {
        chosen = st.pending_w.front();
        st.pending_w.pop_front();
        end += cost(r, ActionKind::W, chosen.segment, layout.vstage(r, chosen.chunk));
        --st.in_flight;
        release(st, chosen.microbatch);
      } else {
        std::int64_t u = forward_unit;
        if (choice == 1) {
          u = st.ready_b.top().second;
          st.ready_b.pop();
        }
        std::int32_t mb, seg, s;
        decode(u, mb, seg, s);
        chosen = Action{ActionKind::F, mb, seg, chunk_of(r, s)};
        if (choice == 0) {
          end += cost(r, ActionKind::F, seg, s);
          ++st.in_flight;
          --st.forwards_left;
          f_issued[u] = 1;
          ++forwarded[static_cast<std::size_t>(s) * m + mb];
          ++st.holding[mb];
          if (s + 1 < V) satisfy(0, mb, seg, s + 1, r, end);
          if (seg + 1 < k) satisfy(0, mb, seg + 1, s, r, end);
          satisfy(1, mb, seg, s, r, end);
        } else {
          chosen.kind = options.split_backward ? ActionKind::B : ActionKind::BW;
          end += cost(r, chosen.kind, seg, s);
          if (options.split_backward) {
            st.pending_w.push_back(Action{ActionKind::W, mb, seg, chosen.chunk});
          } else {
            --st.in_flight;
            release(st, mb);
          }
          if (s > 0) satisfy(1, mb, seg, s - 1, r, end);
          if (seg > 0) satisfy(1, mb, seg - 1, s, r, end);
        }
      }
      schedule.ranks[r].push_back(chosen);
      --st.remaining;
      --remaining;
      st.free = end;
      events.push({end, order++, r, -1, 0});
    }
  }
  return schedule;
}

}  // namespace plait::schedule
