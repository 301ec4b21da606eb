#pragma once
// The validator: checks that a schedule can be executed and computes what it should.
//
// Rules (the ids appear in reports), checked in this order:
//   layout                   the layout is consistent (check_layout)
//   range                    an action's micro-batch, segment or chunk lies inside the layout
//   exactly-once             each unit has one F and either one BW or one B and one W
//   same-rank                F, B and W of a unit run on one rank (the backward needs the
//                            forward's stashed activations), and all segments of a micro-batch
//                            on a virtual stage run on one rank (they share its K/V prefix)
//   kv-prefix-order          F(i,j,s) after F(i,j-1,s): its keys/values attend to the prefix
//   backward-after-forward   B(i,j,s) after F(i,j,s)
//   backward-segment-order   B(i,j,s) after B(i,j+1,s): later segments leave dK/dV for earlier
//   weight-after-backward    W(i,j,s) after B(i,j,s)
//   local-activation-order   F(i,j,s) after F(i,j,s-1) when one rank holds both stages
//   local-gradient-order     B(i,j,s) after B(i,j,s+1) when one rank holds both stages
//   deadlock                 the lowered program, run with blocking send/recv, finishes
// (dependency rules from ../shared/reference/schedules.md; across ranks they are enforced by
// the messages of the lowered program, so breaking them there shows up as a deadlock.)
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plait/core/error.h"
#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule.h"

namespace plait::schedule {

struct Violation {
  std::string rule;
  int rank = -1;      // -1 when no single rank is at fault (a unit missing everywhere)
  int position = -1;  // index in the rank's action list
  std::optional<Action> action;
  std::string detail;  // what was expected and what was found
  // Other (rank, step) cells involved, e.g. the rest of a deadlock cycle (marked in the grid).
  std::vector<std::pair<int, int>> related;
};

struct ValidateOptions {
  // Receive posting used for the deadlock check (see LowerOptions::recv_lookahead).
  std::int32_t recv_lookahead = std::numeric_limits<std::int32_t>::max();
};

// The first violation, or nothing if the schedule is valid.
std::optional<Violation> validate(const Schedule& schedule, const ValidateOptions& options = {});

// The same in two halves, for callers that lower the schedule anyway (the simulator): every rule
// but deadlock, then the deadlock rule on the lowered program (whose Message::post_op fix how
// early receives are posted).
std::optional<Violation> validate_structure(const Schedule& schedule);
std::optional<Violation> check_deadlock(const Schedule& schedule, const LoweredSchedule& lowered);

// One line: "schedule rule <rule>: rank R, step P (F0.1): <detail>".
std::string summary(const Schedule& schedule, const Violation& violation);

// summary() followed by a step-by-rank grid around the failing step.
std::string describe(const Schedule& schedule, const Violation& violation);

// Thrown by check_valid(): what() is the one-line summary, grid() the printout.
class ScheduleViolationError : public Error {
 public:
  ScheduleViolationError(Violation violation, std::string line, std::string grid)
      : Error(std::move(line)), violation_(std::move(violation)), grid_(std::move(grid)) {}
  const Violation& violation() const { return violation_; }
  const std::string& grid() const { return grid_; }

 private:
  Violation violation_;
  std::string grid_;
};

void check_valid(const Schedule& schedule, const ValidateOptions& options = {});

// Throws the ScheduleViolationError for `violation`.
[[noreturn]] void throw_violation(const Schedule& schedule, const Violation& violation);

}  // namespace plait::schedule
