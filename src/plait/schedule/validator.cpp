#include "plait/schedule/validator.h"

#include <utility>
#include <vector>

#include "plait/schedule/blocking_execution.h"
#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule_grid.h"
#include "plait/schedule/unit_index.h"

namespace plait::schedule {

namespace {

std::string unit_text(ActionKind kind, std::int32_t mb, std::int32_t seg, std::int32_t vstage) {
  return std::string(kind_name(kind)) + std::to_string(mb) + "." + std::to_string(seg) +
         " on virtual stage " + std::to_string(vstage);
}

Violation violation(std::string rule, int rank, int position, std::optional<Action> action,
                    std::string detail) {
  Violation v;
  v.rule = std::move(rule);
  v.rank = rank;
  v.position = position;
  v.action = action;
  v.detail = std::move(detail);
  return v;
}

std::string at(int rank, int position) {
  return "rank " + std::to_string(rank) + " step " + std::to_string(position);
}

class Checker {
 public:
  explicit Checker(const Schedule& s) : schedule_(s), layout_(s.layout) {}

  std::optional<Violation> run(const ValidateOptions& options) {
    if (auto v = structure()) return v;
    LowerOptions lower_options;
    lower_options.recv_lookahead = options.recv_lookahead;
    return deadlock(lower(schedule_, lower_options));
  }

  std::optional<Violation> structure() {
    try {
      check_layout(layout_);
    } catch (const Error& e) {
      return violation("layout", -1, -1, std::nullopt, e.what());
    }
    if (schedule_.num_ranks() != layout_.num_ranks()) {
      return violation("layout", -1, -1, std::nullopt,
                       "the layout has " + std::to_string(layout_.num_ranks()) +
                           " ranks but the schedule has " +
                           std::to_string(schedule_.num_ranks()) + " action lists");
    }
    if (auto v = check_ranges()) return v;
    index_.emplace(schedule_);
    if (auto v = check_actions()) return v;
    return check_complete();
  }

 private:
  std::optional<Violation> check_ranges() const {
    for (int r = 0; r < schedule_.num_ranks(); ++r) {
      const auto& actions = schedule_.ranks[r];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        std::string problem;
        if (a.chunk < 0 || a.chunk >= layout_.num_chunks(r)) {
          problem = "chunk " + std::to_string(a.chunk) + " but rank " + std::to_string(r) +
                    " holds " + std::to_string(layout_.num_chunks(r)) + " chunk(s)";
        } else if (a.microbatch < 0 || a.microbatch >= layout_.num_microbatches) {
          problem = "micro-batch " + std::to_string(a.microbatch) + " outside [0, " +
                    std::to_string(layout_.num_microbatches) + ")";
        } else if (a.segment < 0 || a.segment >= layout_.num_segments) {
          problem = "segment " + std::to_string(a.segment) + " outside [0, " +
                    std::to_string(layout_.num_segments) + ")";
        }
        if (!problem.empty()) return violation("range", r, i, a, problem);
      }
    }
    return std::nullopt;
  }

  // Rules that concern one action and the actions it depends on, in (rank, step) order.
  std::optional<Violation> check_actions() const {
    const UnitIndex& ix = *index_;
    const std::int32_t k = layout_.num_segments;
    const std::int32_t V = layout_.num_vstages;
    for (int r = 0; r < schedule_.num_ranks(); ++r) {
      const auto& actions = schedule_.ranks[r];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        const std::int32_t s = layout_.vstage(r, a.chunk);
        const std::int64_t u = ix.unit(a.microbatch, a.segment, s);
        auto fail = [&](const char* rule, std::string detail) {
          return violation(rule, r, i, a, std::move(detail));
        };
        if (ix.rank(a.kind, u) != r || ix.position(a.kind, u) != i) {
          return fail("exactly-once", unit_text(a.kind, a.microbatch, a.segment, s) +
                                          " appears again; first at " +
                                          at(ix.rank(a.kind, u), ix.position(a.kind, u)));
        }
        // Requires `kind` of unit `dep` to be on this rank before step i, if it is scheduled.
        auto before = [&](ActionKind kind, std::int64_t dep, std::int32_t seg, std::int32_t stage,
                          const char* order_rule, bool cross_rank_allowed) -> std::optional<Violation> {
          const std::int32_t dr = ix.rank(kind, dep);
          if (dr == UnitIndex::kNone) return std::nullopt;  // reported as missing later
          if (dr != r) {
            if (cross_rank_allowed) return std::nullopt;  // a message orders them
            return fail("same-rank", "expected " + unit_text(kind, a.microbatch, seg, stage) +
                                         " on rank " + std::to_string(r) + ", found it on " +
                                         at(dr, ix.position(kind, dep)));
          }
          if (ix.position(kind, dep) > i) {
            return fail(order_rule, "expected after " + unit_text(kind, a.microbatch, seg, stage) +
                                        ", which comes later at step " +
                                        std::to_string(ix.position(kind, dep)));
          }
          return std::nullopt;
        };
        std::optional<Violation> v;
        switch (a.kind) {
          case ActionKind::F:
            if (a.segment > 0) {
              v = before(ActionKind::F, ix.unit(a.microbatch, a.segment - 1, s), a.segment - 1, s,
                         "kv-prefix-order", false);
            }
            if (!v && s > 0) {
              v = before(ActionKind::F, ix.unit(a.microbatch, a.segment, s - 1), a.segment, s - 1,
                         "local-activation-order", true);
            }
            break;
          case ActionKind::B:
          case ActionKind::BW: {
            const ActionKind other = a.kind == ActionKind::B ? ActionKind::BW : ActionKind::B;
            if (ix.count(other, u) > 0) {
              return fail("exactly-once", "the backward of this unit is scheduled both fused (BW) "
                                          "and split (B); expected one of them");
            }
            v = before(ActionKind::F, u, a.segment, s, "backward-after-forward", false);
            if (!v && a.segment + 1 < k) {
              const std::int64_t next = ix.unit(a.microbatch, a.segment + 1, s);
              v = before(ix.backward_kind(next), next, a.segment + 1, s, "backward-segment-order",
                         false);
            }
            if (!v && s + 1 < V) {
              const std::int64_t up = ix.unit(a.microbatch, a.segment, s + 1);
              v = before(ix.backward_kind(up), up, a.segment, s + 1, "local-gradient-order", true);
            }
            break;
          }
          case ActionKind::W:
            if (ix.count(ActionKind::BW, u) > 0) {
              return fail("exactly-once", "W of a unit whose backward is fused (BW); expected "
                                          "either BW alone or B and W");
            }
            v = before(ActionKind::B, u, a.segment, s, "weight-after-backward", false);
            break;
        }
        if (v) return v;
      }
    }
    return std::nullopt;
  }

  std::optional<Violation> check_complete() const {
    const UnitIndex& ix = *index_;
    for (std::int32_t mb = 0; mb < layout_.num_microbatches; ++mb) {
      for (std::int32_t seg = 0; seg < layout_.num_segments; ++seg) {
        for (std::int32_t s = 0; s < layout_.num_vstages; ++s) {
          const std::int64_t u = ix.unit(mb, seg, s);
          auto missing = [&](ActionKind kind, const std::string& why) {
            return violation("exactly-once", -1, -1, Action{kind, mb, seg, 0},
                             unit_text(kind, mb, seg, s) + " is never scheduled" + why);
          };
          if (ix.count(ActionKind::F, u) == 0) return missing(ActionKind::F, "");
          const bool fused = ix.count(ActionKind::BW, u) > 0;
          if (!fused && ix.count(ActionKind::B, u) == 0) {
            return missing(ActionKind::B, " (expected BW, or B and W)");
          }
          if (!fused && ix.count(ActionKind::W, u) == 0) {
            return missing(ActionKind::W, " (its B is scheduled, so W must be too)");
          }
        }
      }
    }
    return std::nullopt;
  }

  // The compute position an op belongs to: a receive's consumer, a send's producer.
  static int step_of(const LoweredSchedule& lowered, int rank, std::int32_t op) {
    const auto& program = lowered.programs[rank];
    const int dir = program[op].kind == OpKind::recv ? 1 : -1;
    while (program[op].kind != OpKind::compute) op += dir;
    return program[op].index;
  }

 public:
  std::optional<Violation> deadlock(const LoweredSchedule& lowered_) const {
    const BlockingOutcome outcome = execute_blocking(lowered_);
    if (outcome.completed) return std::nullopt;
    std::vector<std::int32_t> blocked_op(schedule_.num_ranks(), -1), message(schedule_.num_ranks(), -1);
    for (const BlockedRank& b : outcome.blocked) {
      blocked_op[b.rank] = b.op;
      message[b.rank] = b.message;
    }
    // Follow the chain of waits from the lowest blocked rank until it closes.
    const int first = outcome.blocked.front().rank;
    std::string story;
    std::vector<char> seen(schedule_.num_ranks(), 0);
    std::vector<std::pair<int, int>> cycle;
    int r = first;
    while (!seen[r]) {
      seen[r] = 1;
      const Message& msg = lowered_.messages[message[r]];
      const MessageKey key = lowered_.key(msg);
      const bool receiving = lowered_.programs[r][blocked_op[r]].kind == OpKind::recv;
      const int step = step_of(lowered_, r, blocked_op[r]);
      cycle.emplace_back(r, step);
      const Action& act = schedule_.ranks[r][step];
      const int peer = receiving ? msg.src_rank : msg.dst_rank;
      if (!story.empty()) story += "; ";
      story += "rank " + std::to_string(r) + " at step " + std::to_string(step) + " (" +
               to_string(act, layout_.max_chunks() > 1) + ") " +
               (receiving ? "waits for the " : "waits for rank " + std::to_string(peer) +
                                                   " to post the receive of the ") +
               (key.payload == Payload::activation ? "activation" : "gradient") +
               " of micro-batch " + std::to_string(key.microbatch) + " segment " +
               std::to_string(key.segment) + " (stages " + std::to_string(key.boundary) + "->" +
               std::to_string(key.boundary + 1) + ")" +
               (receiving ? " from rank " + std::to_string(peer) : "");
      r = peer;
    }
    story += "; rank " + std::to_string(r) + " is already waiting: a cycle";
    const int step = cycle.front().second;
    Violation v = violation("deadlock", first, step, schedule_.ranks[first][step],
                            "blocking send/recv cannot finish: " + story);
    v.related.assign(cycle.begin() + 1, cycle.end());
    return v;
  }

 private:
  const Schedule& schedule_;
  const Layout& layout_;
  std::optional<UnitIndex> index_;
};

}  // namespace

std::optional<Violation> validate(const Schedule& schedule, const ValidateOptions& options) {
  Checker checker(schedule);
  return checker.run(options);
}

std::string summary(const Schedule& schedule, const Violation& v) {
  std::string out = "schedule rule " + v.rule + ": ";
  if (v.rank >= 0) {
    out += "rank " + std::to_string(v.rank) + ", step " + std::to_string(v.position);
    if (v.action) out += " (" + to_string(*v.action, schedule.layout.max_chunks() > 1) + ")";
    out += ": ";
  }
  return out + v.detail;
}

std::string describe(const Schedule& schedule, const Violation& v) {
  std::string out = summary(schedule, v) + "\n";
  if (v.rank >= 0 && v.rank < schedule.num_ranks()) {
    std::vector<GridMark> marks{{v.rank, v.position}};
    for (const auto& [rank, step] : v.related) marks.push_back({rank, step});
    out += format_grid(schedule, marks);
  }
  return out;
}

std::optional<Violation> validate_structure(const Schedule& schedule) {
  Checker checker(schedule);
  return checker.structure();
}

std::optional<Violation> check_deadlock(const Schedule& schedule, const LoweredSchedule& lowered) {
  Checker checker(schedule);
  return checker.deadlock(lowered);
}

void throw_violation(const Schedule& schedule, const Violation& v) {
  throw ScheduleViolationError(v, summary(schedule, v), describe(schedule, v));
}

void check_valid(const Schedule& schedule, const ValidateOptions& options) {
  if (auto v = validate(schedule, options)) throw_violation(schedule, *v);
}

}  // namespace plait::schedule
