#pragma once
// Tier (a) of re-balancing a running job (issue 26; docs/runtime.md, "Stragglers and restarts"):
// when the straggler detector flags a rank that shares its pipeline stage with data-parallel
// peers, that stage's micro-batches are re-split over the group in proportion to the ranks'
// measured speeds (schedule::microbatch_shares, the planner's rule), and the schedule is
// regenerated with those counts by the plan's family (schedule::heterogeneous_schedule: the
// routing and list scheduling the planner uses for uneven shares, here fed the measured seconds
// per unit). When the group's last flagged rank is cleared, its plan's counts come back (and the
// plan's own schedule once every group has them). This is ReCycle's move (Gandhi et al., SOSP'24:
// re-route micro-batches to data-parallel peers) inside one step's global batch.
//
// Memory: a rank given more micro-batches may hold more of them in flight (GPipe holds every
// one; 1F1B-style schedules up to their stage depth), so before a regenerated schedule is swapped
// in, the simulator predicts every rank's peak under it (predicted_memory.h, the memory model
// `plait bench runtime memory` checks against the runtime). Where a rank's emulated device has a
// capacity (parallel.devices memory) and its predicted peak would exceed it while growing past
// the peak predicted for the schedule in force, the re-balance is declined (the shares in force
// stay; a later flag or clear may try again) rather than let the rank run out of memory mid-step.
// The comparison with the schedule in force makes the check independent of the model's absolute
// error: a re-balance that grows no rank's predicted peak is never declined.
//
// Nothing moves but micro-batches: every rank keeps its stages, parameters and optimizer state;
// the global batch and the global ids of its micro-batches stay (a micro-batch's tokens are a
// function of (step, id), data/batch_source.h, so the data follows whichever rank runs it), and
// only the grouping of each stage's gradient sums changes (fp32 reassociation). Every input is
// what every rank holds after the step's reduction (all ranks' step times, the detector's
// decisions) and the arithmetic is the same everywhere, so every rank builds the same schedule
// without an exchange and the job switches at the same step boundary.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/rank_step_times.h"
#include "plait/runtime/straggler_detector.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/schedule/schedule_family.h"

namespace plait::runtime {

// One stage group's new micro-batch shares: the value the runtime applies (a plan delta).
struct ShareChange {
  std::int64_t step = 0;              // decided after this step; the next one runs the new shares
  int position = 0;                   // the group's pipeline position
  std::vector<std::int32_t> vstages;  // the virtual stages its ranks hold
  std::vector<int> ranks;             // its ranks (schedule ranks), ascending
  std::vector<int> before, after;     // micro-batches per rank, in `ranks` order
  int rank = 0;                       // the rank whose flag or clear decided it
  bool flagged = true;                // false: cleared
  bool planned = false;               // `after` is the plan's shares (the last straggler cleared)
  double slowdown = 1;                // that rank's slowdown against its history then
};

// "re-balance: step 12: stage 0 data-parallel shares 4/4 -> 6/2 (ranks 0, 2; rank 2 flagged at
// 3.02x its history)"; describe_shares: the part from "stage".
std::string describe(const ShareChange& change);
std::string describe_shares(const ShareChange& change);

class ShareRebalancer {
 public:
  struct Decision {
    std::vector<ShareChange> changes;
    schedule::Schedule schedule;  // validated; run it from the next step on
  };

  // `plan` as built from the config (its schedule is the one restored); `config` the
  // "stragglers" section (rebalance, consecutive).
  ShareRebalancer(const StragglerConfig& config, const PipelinePlan& plan);

  // "" when tier (a) can act on this plan, else why it cannot (for the run's header).
  const std::string& unavailable() const { return unavailable_; }

  // After each step, on every rank: every job rank's times (DistributedStepResult::ranks) and the
  // detector's flags and clears of that step. A new schedule when some group's shares change.
  std::optional<Decision> observe(std::int64_t step, const std::vector<RankStepTimes>& ranks,
                                  const std::vector<StragglerChange>& changes, const StragglerDetector& detector);

  // Why the last observe() could not apply a re-balance, once, or "": the schedule could not be
  // regenerated (the shares in force stay and re-balancing stops), or the new schedule would not
  // fit a rank's memory (declined; re-balancing goes on). The same on every rank.
  std::string take_failure();

  // The micro-batches every rank runs now, by group (HeterogeneousPipeline::stage_counts).
  const schedule::HeterogeneousPipeline& pipeline() const { return current_; }

 private:
  // Seconds per unit of `rank` (schedule rank) for `kind` (rank_step_times.h's order), the
  // median of the recent steps; 0 when it ran none. kind kUnitKinds: all kinds together.
  double seconds_per_unit(int rank, std::size_t kind) const;
  std::optional<ShareChange> rebalance(int position, std::int64_t step, const StragglerChange& why);
  // "" when `schedule` fits every rank's device memory (above), else why not.
  std::string over_capacity(const schedule::Schedule& schedule, const schedule::Schedule& in_force) const;

  StragglerConfig config_;
  PipelinePlan plan_;  // the plan as built (its devices' capacities, the memory model's inputs)
  schedule::Schedule schedule_;  // the one in force (the plan's is plan_.schedule)
  const schedule::ScheduleFamily* family_ = nullptr;
  std::string unavailable_, failure_;
  schedule::HeterogeneousPipeline planned_pipeline_, current_;
  std::vector<int> position_of_rank_;  // schedule rank -> its group
  // Per schedule rank, the last `consecutive` steps' seconds and units per kind.
  std::vector<std::deque<RankStepTimes>> recent_;
};

}  // namespace plait::runtime
