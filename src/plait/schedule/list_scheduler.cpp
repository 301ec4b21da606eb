#include "plait/schedule/list_scheduler.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <queue>
#include <map>
#include <optional>
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
  // With reserve_whole_microbatches: units not yet started of the micro-batches the rank has
  // started, and their sum (room kept free under the limit).
  std::map<std::int32_t, int> unstarted;
  int reserved = 0;
  double free = 0.0;
  int in_flight = 0;
  int limit = 0;  // 0: unlimited
  std::int64_t remaining = 0;
  std::int64_t forwards_left = 0;
};

// The scheduler's passes: route every unit to its rank, count each rank's work, seed the
// dependency counts, then run the event loop (wake the ranks whose inputs arrived, let each free
// rank choose and issue one action) until every action is issued.
class ListScheduler {
 public:
  ListScheduler(const Layout& layout, const ListSchedulerOptions& options)
      : layout_(layout),
        options_(options),
        ranks_(layout.num_ranks()),
        m_(layout.num_microbatches),
        k_(layout.num_segments),
        V_(layout.num_vstages) {
    route_units();
    count_work();
    seed_dependencies();
  }

  Schedule run() {
    Schedule schedule = empty_schedule(layout_);
    while (remaining_ > 0) {
      const double now = next_event_time();
      wake(now);
      for (int r : woken_) {
        if (std::optional<Action> a = dispatch(state_[r], now)) schedule.ranks[r].push_back(*a);
      }
    }
    return schedule;
  }

 private:
  std::int64_t unit_of(std::int32_t mb, std::int32_t seg, std::int32_t s) const {
    return (std::int64_t{s} * m_ + mb) * k_ + seg;
  }
  void decode(std::int64_t u, std::int32_t& mb, std::int32_t& seg, std::int32_t& s) const {
    seg = static_cast<std::int32_t>(u % k_);
    mb = static_cast<std::int32_t>((u / k_) % m_);
    s = static_cast<std::int32_t>(u / (std::int64_t{k_} * m_));
  }
  std::int32_t owner_of(std::int32_t s, std::int32_t mb) const {
    return owner_[static_cast<std::size_t>(s) * m_ + mb];
  }
  std::int32_t chunk_of(int r, std::int32_t s) const {
    const auto& v = layout_.rank_vstages[r];
    return static_cast<std::int32_t>(std::find(v.begin(), v.end(), s) - v.begin());
  }
  // Forward keys: the deepest stage first, then the oldest micro-batch, then the segment.
  std::uint64_t forward_key(std::int32_t mb, std::int32_t seg, std::int32_t s) const {
    return (static_cast<std::uint64_t>(V_ - 1 - s) << 44) | (static_cast<std::uint64_t>(mb) << 16) |
           static_cast<std::uint64_t>(seg);
  }
  // Backward keys: the oldest micro-batch first, then the deepest stage, then the latest segment.
  std::uint64_t backward_key(std::int32_t mb, std::int32_t seg, std::int32_t s) const {
    return (static_cast<std::uint64_t>(mb) << 32) | (static_cast<std::uint64_t>(V_ - 1 - s) << 16) |
           static_cast<std::uint64_t>(k_ - 1 - seg);
  }

  double cost(int r, ActionKind kind, std::int32_t seg, std::int32_t s) const {
    if (options_.unit_seconds) {
      if (kind == ActionKind::BW) {
        return options_.unit_seconds(r, ActionKind::B, seg, s) + options_.unit_seconds(r, ActionKind::W, seg, s);
      }
      return options_.unit_seconds(r, kind, seg, s);
    }
    switch (kind) {
      case ActionKind::F: return options_.forward_cost;
      case ActionKind::B: return options_.backward_cost;
      case ActionKind::W: return options_.weight_cost;
      case ActionKind::BW: return options_.backward_cost + options_.weight_cost;
    }
    return 0.0;
  }

  // Pass 1: who runs each (virtual stage, micro-batch): the routing given, or the one rank that
  // holds each stage.
  void route_units() {
    owner_.assign(static_cast<std::size_t>(V_) * m_, -1);
    if (options_.microbatch_rank.empty()) {
      std::vector<std::int32_t> holder(V_, -1);
      for (int r = 0; r < ranks_; ++r) {
        for (std::int32_t s : layout_.rank_vstages[r]) {
          if (holder[s] >= 0) {
            throw Error("list scheduler: virtual stage " + std::to_string(s) + " is held by ranks " +
                        std::to_string(holder[s]) + " and " + std::to_string(r) +
                        "; give microbatch_rank to say which rank runs which micro-batch");
          }
          holder[s] = r;
        }
      }
      for (std::int32_t s = 0; s < V_; ++s) std::fill_n(&owner_[static_cast<std::size_t>(s) * m_], m_, holder[s]);
      return;
    }
    if (static_cast<std::int32_t>(options_.microbatch_rank.size()) != V_) {
      throw Error("list scheduler: microbatch_rank has " + std::to_string(options_.microbatch_rank.size()) +
                  " stages, the layout " + std::to_string(V_));
    }
    for (std::int32_t s = 0; s < V_; ++s) {
      const auto& row = options_.microbatch_rank[s];
      if (static_cast<std::int32_t>(row.size()) != m_) {
        throw Error("list scheduler: microbatch_rank[" + std::to_string(s) + "] has " +
                    std::to_string(row.size()) + " micro-batches, the layout " + std::to_string(m_));
      }
      for (std::int32_t mb = 0; mb < m_; ++mb) {
        const std::int32_t r = row[mb];
        const bool holds = r >= 0 && r < ranks_ &&
                           std::find(layout_.rank_vstages[r].begin(), layout_.rank_vstages[r].end(), s) !=
                               layout_.rank_vstages[r].end();
        if (!holds) {
          throw Error("list scheduler: micro-batch " + std::to_string(mb) + " of virtual stage " +
                      std::to_string(s) + " is routed to rank " + std::to_string(r) +
                      ", which does not hold that stage");
        }
        owner_[static_cast<std::size_t>(s) * m_ + mb] = r;
      }
    }
  }

  // Pass 2: each rank's limit and the actions and forwards it has to issue.
  void count_work() {
    state_.resize(ranks_);
    const int actions_per_unit = options_.split_backward ? 3 : 2;
    for (int r = 0; r < ranks_; ++r) {
      state_[r].rank = r;
      state_[r].limit = options_.rank_max_in_flight.empty()
                            ? options_.max_in_flight
                            : options_.rank_max_in_flight.at(static_cast<std::size_t>(r));
    }
    for (std::int32_t s = 0; s < V_; ++s) {
      for (std::int32_t mb = 0; mb < m_; ++mb) {
        RankState& st = state_[owner_of(s, mb)];
        st.remaining += std::int64_t{k_} * actions_per_unit;
        st.forwards_left += k_;
        remaining_ += std::int64_t{k_} * actions_per_unit;
      }
    }
  }

  // Pass 3: unmet inputs of every unit's F and B; the units with none are ready at time 0.
  void seed_dependencies() {
    const std::size_t units = static_cast<std::size_t>(layout_.num_units());
    for (int kind = 0; kind < 2; ++kind) {
      deps_[kind].assign(units, 0);
      ready_at_[kind].assign(units, 0.0);
    }
    f_issued_.assign(units, 0);
    f_ready_.assign(units, 0);
    forwarded_.assign(static_cast<std::size_t>(V_) * m_, 0);
    for (std::int32_t s = 0; s < V_; ++s) {
      for (std::int32_t mb = 0; mb < m_; ++mb) {
        for (std::int32_t seg = 0; seg < k_; ++seg) {
          const std::int64_t u = unit_of(mb, seg, s);
          deps_[0][u] = static_cast<std::uint8_t>((s > 0) + (seg > 0));
          deps_[1][u] = static_cast<std::uint8_t>(1 + (s + 1 < V_) + (seg + 1 < k_));
          if (deps_[0][u] == 0) events_.push({0.0, order_++, owner_of(s, mb), 0, u});
        }
      }
    }
  }

  // The time of the next event; throws when none is left while work remains (a stall).
  double next_event_time() const {
    if (events_.empty()) {
      for (int r = 0; r < ranks_; ++r) {
        if (state_[r].remaining == 0) continue;
        throw Error("list scheduler: the ranks stalled with " + std::to_string(remaining_) +
                    " actions left; rank " + std::to_string(r) + " has " +
                    std::to_string(state_[r].remaining) + " left with " +
                    std::to_string(state_[r].in_flight) + " units in flight (limit " +
                    std::to_string(state_[r].limit) + ", too small for this layout)");
      }
    }
    return events_.top().time;
  }

  // Every event at `now`: ready units join their rank's queues; woken_ lists the ranks, once each.
  void wake(double now) {
    woken_.clear();
    while (!events_.empty() && events_.top().time <= now) {
      const Event e = events_.top();
      events_.pop();
      woken_.push_back(e.rank);
      if (e.ready_kind < 0) continue;
      std::int32_t mb, seg, s;
      decode(e.unit, mb, seg, s);
      if (e.ready_kind == 0) {
        f_ready_[e.unit] = 1;
        state_[e.rank].ready_f.push({forward_key(mb, seg, s), e.unit});
      } else {
        state_[e.rank].ready_b.push({backward_key(mb, seg, s), e.unit});
      }
    }
    std::sort(woken_.begin(), woken_.end());
    woken_.erase(std::unique(woken_.begin(), woken_.end()), woken_.end());
  }

  // One input of (kind, unit) on its owner is produced on rank `from` at `end`.
  void satisfy(int kind, std::int32_t mb, std::int32_t seg, std::int32_t s, int from, double end) {
    const std::int64_t u = unit_of(mb, seg, s);
    const int to = owner_of(s, mb);
    double t = end;
    if (to != from && options_.transfer_seconds) t += options_.transfer_seconds(from, to, seg);
    ready_at_[kind][u] = std::max(ready_at_[kind][u], t);
    if (--deps_[kind][u] == 0) events_.push({ready_at_[kind][u], order_++, to, static_cast<std::int8_t>(kind), u});
  }

  static void release(RankState& st, std::int32_t mb) {
    auto it = st.holding.find(mb);
    if (--it->second == 0) st.holding.erase(it);
  }

  // The forward a rank may start now, or -1. Below its in-flight limit: the best ready one.
  // At the limit: the best ready forward of a micro-batch the rank already holds (its next
  // segment, or its next chunk), never a new micro-batch. Without that, segments or chunks
  // arriving out of order (from upstream ranks of different speeds) could fill the limit with
  // micro-batches none of which can finish its forwards and come back as a backward; with it,
  // a micro-batch once started on a rank always gets through it, so the ranks cannot stall.
  // (This second kind comes after pending W's, which free memory themselves.)
  std::int64_t pick_forward(RankState& st, bool at_limit) {
    while (!st.ready_f.empty() && f_issued_[st.ready_f.top().second]) st.ready_f.pop();
    if (!at_limit && options_.reserve_whole_microbatches && st.limit > 0) return pick_admissible_forward(st);
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
      for (std::int32_t s : layout_.rank_vstages[st.rank]) {
        const std::int32_t seg = forwarded_[static_cast<std::size_t>(s) * m_ + mb];
        if (seg >= k_) continue;
        const std::int64_t u = unit_of(mb, seg, s);
        if (!f_ready_[u] || f_issued_[u]) continue;
        const std::uint64_t key = forward_key(mb, seg, s);
        if (best < 0 || key < best_key) best = u, best_key = key;
      }
    }
    return best;
  }

  // Units micro-batch mb has on rank r: k per virtual stage of r that routes mb to r.
  int units_on_rank(int r, std::int32_t mb) const {
    int n = 0;
    for (std::int32_t s : layout_.rank_vstages[r]) n += owner_of(s, mb) == r ? k_ : 0;
    return n;
  }

  // reserve_whole_microbatches: the best ready forward that is the next unit of a started
  // micro-batch, or starts a micro-batch whose units on this rank all fit under the limit with
  // the room already reserved; -1 if none.
  std::int64_t pick_admissible_forward(RankState& st) {
    std::vector<std::pair<std::uint64_t, std::int64_t>> skipped;
    std::int64_t chosen = -1;
    while (!st.ready_f.empty()) {
      const auto top = st.ready_f.top();
      st.ready_f.pop();
      if (f_issued_[top.second]) continue;
      std::int32_t mb, seg, s;
      decode(top.second, mb, seg, s);
      if (st.unstarted.count(mb) || st.in_flight + st.reserved + units_on_rank(st.rank, mb) <= st.limit) {
        chosen = top.second;
        break;
      }
      skipped.push_back(top);
    }
    for (const auto& e : skipped) st.ready_f.push(e);
    return chosen;
  }

  // A free rank's choice (list_scheduler.h, rules 1-5) and its issue; nullopt: it waits.
  std::optional<Action> dispatch(RankState& st, double now) {
    if (st.remaining == 0 || st.free > now) return std::nullopt;
    const bool may_backward = !st.ready_b.empty() && (!options_.forwards_first || st.forwards_left == 0);
    const bool at_limit = st.limit > 0 && st.in_flight >= st.limit;
    std::int64_t forward_unit = -1;
    if ((options_.forwards_first || !may_backward) && !at_limit) forward_unit = pick_forward(st, false);
    enum Choice { wait, forward, backward, weight } choice;
    if (options_.forwards_first) {
      choice = forward_unit >= 0 ? forward : may_backward ? backward : !st.pending_w.empty() ? weight : wait;
    } else {
      choice = may_backward ? backward : forward_unit >= 0 ? forward : !st.pending_w.empty() ? weight : wait;
    }
    if (choice == wait && at_limit && (forward_unit = pick_forward(st, true)) >= 0) choice = forward;
    Action chosen;
    double end = now;
    switch (choice) {
      case wait: return std::nullopt;
      case forward: chosen = issue_forward(st, forward_unit, end); break;
      case backward: {
        const std::int64_t u = st.ready_b.top().second;
        st.ready_b.pop();
        chosen = issue_backward(st, u, end);
        break;
      }
      case weight: chosen = issue_weight(st, end); break;
    }
    --st.remaining;
    --remaining_;
    st.free = end;
    events_.push({end, order_++, st.rank, -1, 0});
    return chosen;
  }

  // Each issue advances `end` by the action's cost and releases what it unblocks.
  Action issue_forward(RankState& st, std::int64_t u, double& end) {
    std::int32_t mb, seg, s;
    decode(u, mb, seg, s);
    const int r = st.rank;
    end += cost(r, ActionKind::F, seg, s);
    ++st.in_flight;
    --st.forwards_left;
    f_issued_[u] = 1;
    ++forwarded_[static_cast<std::size_t>(s) * m_ + mb];
    ++st.holding[mb];
    if (options_.reserve_whole_microbatches) {
      auto it = st.unstarted.find(mb);
      if (it == st.unstarted.end()) {
        const int left = units_on_rank(r, mb) - 1;  // this unit starts now
        if (left > 0) st.unstarted.emplace(mb, left), st.reserved += left;
      } else {
        --st.reserved;
        if (--it->second == 0) st.unstarted.erase(it);
      }
    }
    if (s + 1 < V_) satisfy(0, mb, seg, s + 1, r, end);
    if (seg + 1 < k_) satisfy(0, mb, seg + 1, s, r, end);
    satisfy(1, mb, seg, s, r, end);
    return Action{ActionKind::F, mb, seg, chunk_of(r, s)};
  }

  Action issue_backward(RankState& st, std::int64_t u, double& end) {
    std::int32_t mb, seg, s;
    decode(u, mb, seg, s);
    const int r = st.rank;
    const Action chosen{options_.split_backward ? ActionKind::B : ActionKind::BW, mb, seg, chunk_of(r, s)};
    end += cost(r, chosen.kind, seg, s);
    if (options_.split_backward) {
      st.pending_w.push_back(Action{ActionKind::W, mb, seg, chosen.chunk});
    } else {
      --st.in_flight;
      release(st, mb);
    }
    if (s > 0) satisfy(1, mb, seg, s - 1, r, end);
    if (seg > 0) satisfy(1, mb, seg - 1, s, r, end);
    return chosen;
  }

  Action issue_weight(RankState& st, double& end) {
    const Action chosen = st.pending_w.front();
    st.pending_w.pop_front();
    end += cost(st.rank, ActionKind::W, chosen.segment, layout_.vstage(st.rank, chosen.chunk));
    --st.in_flight;
    release(st, chosen.microbatch);
    return chosen;
  }

  const Layout& layout_;
  const ListSchedulerOptions& options_;
  const int ranks_;
  const std::int32_t m_, k_, V_;
  std::vector<std::int32_t> owner_;  // [vstage][mb]: the rank that runs it
  std::vector<RankState> state_;
  std::int64_t remaining_ = 0;
  // Unmet inputs and the time the last one arrives, per unit, for F (0) and B (1).
  std::vector<std::uint8_t> deps_[2];
  std::vector<double> ready_at_[2];
  std::vector<std::uint8_t> f_issued_, f_ready_;
  std::vector<std::uint16_t> forwarded_;  // [vstage][mb]: forwards issued (the next segment)
  std::priority_queue<Event, std::vector<Event>, EventLater> events_;
  std::uint64_t order_ = 0;
  std::vector<int> woken_;
};

}  // namespace

Schedule list_schedule(const Layout& layout, const ListSchedulerOptions& options) {
  check_layout(layout);
  if (layout.num_vstages >= (1 << 16) || layout.num_segments >= (1 << 16) || layout.num_microbatches >= (1 << 28)) {
    throw Error("list scheduler: layout too large (stages < 65536, segments < 65536, micro-batches < 2^28)");
  }
  return ListScheduler(layout, options).run();
}

}  // namespace plait::schedule
