#pragma once
// Schedule families: each generator is one file (gpipe.cpp, one_f_one_b.cpp, ...) that describes
// itself (name, source, constraints, policy) and produces a Schedule for a pipeline shape. The
// registry lists them in the order the CLI's --compare prints them.
//
// The policy fields say what a family's schedules are, so that code outside the generators (the
// heterogeneous list scheduler, the planner and its estimate) reads fields and never compares
// family names: a new family is its file and its registry entry. Each field is pinned against the
// generator's output on a grid of shapes (tests/schedule/family_policy_test.cpp): a family whose
// fields disagree with what its generator produces fails there.
#include <string>
#include <string_view>
#include <vector>

#include "plait/schedule/schedule.h"
#include "plait/schedule/unit_costs.h"

namespace plait::schedule {

// What a generator is asked for: p ranks in a pipeline, v chunks per rank, m micro-batches,
// k sequence segments per micro-batch.
struct PipelineShape {
  int stages = 1;
  int chunks = 1;
  int microbatches = 1;
  int segments = 1;
};

// Units (one segment of one micro-batch on one chunk) held by rank `rank` of `shape`, as a
// function of the layout; see ScheduleFamily::in_flight_limit.
using UnitsOfRank = int (*)(const PipelineShape& shape, int rank);

struct ScheduleFamily {
  std::string name;    // CLI name: "gpipe", "1f1b", "interleaved", ...
  std::string title;   // "1F1B (PipeDream-Flush)"
  std::string source;  // where the schedule comes from (paper, repository)
  // Schedules (micro-batch, segment) units; otherwise segments must be 1.
  bool sequence_level = false;
  // v this family always uses (1 or 2), or 0 when it takes v >= 2 from the caller (1 for a
  // contiguous placement, 2 for the V, 0 for interleaved).
  int fixed_chunks = 1;

  // Policy. Backward as B (input gradient) and W (weight gradient) actions, W free to fill
  // bubbles (zero-bubble, Qi et al. arXiv 2401.10241); otherwise one fused BW.
  bool split_backward = false;
  // Where the chunks' virtual stages sit (layout.h).
  StagePlacement placement = StagePlacement::contiguous;
  // Every rank issues all its forwards before any backward (GPipe).
  bool forwards_first = false;
  // The most units rank r holds before their input-gradient backward ends (F started, B or BW
  // not finished) when the rank has that many: the warm-up + 1 of the 1F1B families, ZB-V's 2p;
  // null: no limit (all of them, GPipe). The activation memory bound of the family.
  UnitsOfRank in_flight_limit = nullptr;
  // W's rank r holds back beyond that (their units keep what W needs): ZB-H1's r deferred W's;
  // null: none.
  UnitsOfRank deferred_weights = nullptr;
  // The family this one is, action for action, with one segment ("" if none): seq1f1b -> 1f1b.
  std::string one_segment_twin = {};
  // An F immediately followed by a backward of the rank's other chunk is one pair that a GPU
  // overlaps (DualPipe: one chunk's forward with another's backward); CPU ranks run the two in
  // order. Read by the simulator's overlap option (SimOptions::overlap_pairs).
  bool overlapped_pairs = false;
  // The families added after the first eight (issue 25): `plait plan` searches them by default,
  // but their estimates compete for simulation slots of their own (PlannerOptions::
  // simulate_newer) instead of the eight's (simulate), so that adding them never pushes out a
  // layout the eight would have simulated (planner.cpp, "shortlist").
  bool own_simulation_slots = false;

  // Why the family cannot produce `shape` beyond the common checks, or "" if it can; may be null.
  std::string (*unsupported)(const PipelineShape&) = nullptr;
  // The family's order for F = B = W (its textbook construction; what `plait train` runs).
  Schedule (*generate)(const PipelineShape&) = nullptr;
  // For families whose published construction simulates the real unit costs (ZB-V: the
  // zero-bubble authors' zbv.py takes the profiled F, B, W and message times): the order built for
  // `costs`, within the family's in-flight limit; null for fixed patterns. With empty costs it is
  // generate(shape).
  Schedule (*generate_for_costs)(const PipelineShape&, const UnitCosts& costs) = nullptr;

  // in_flight_limit(shape, rank), or 0 when unlimited.
  int limit_of(const PipelineShape& shape, int rank) const {
    return in_flight_limit ? in_flight_limit(shape, rank) : 0;
  }
  int deferred_of(const PipelineShape& shape, int rank) const {
    return deferred_weights ? deferred_weights(shape, rank) : 0;
  }
};

const std::vector<ScheduleFamily>& schedule_families();

// Null when no family has that name.
const ScheduleFamily* find_schedule_family(std::string_view name);

// The family of that name; throws plait::Error listing the families when there is none.
const ScheduleFamily& schedule_family(std::string_view name);

// "gpipe, 1f1b, interleaved, ..." for error messages and --help.
std::string schedule_family_names();

// "" when `family` can produce `shape`, else one sentence saying which constraint fails and why.
std::string unsupported_reason(const ScheduleFamily& family, const PipelineShape& shape);

// Generates, after checking the constraints (plait::Error with the reason if they fail).
Schedule generate_schedule(const ScheduleFamily& family, const PipelineShape& shape);
Schedule generate_schedule(std::string_view name, const PipelineShape& shape);

}  // namespace plait::schedule
