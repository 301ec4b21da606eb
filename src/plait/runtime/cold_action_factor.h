#pragma once
// A rank's speed when it ran only cold actions (issue 26; the straggler detector's input).
//
// RankStepTimes::seconds_per_unit leaves out each step's first action of every (chunk, kind):
// those run cold (weights the optimizer just changed come into the caches) and cost 1.2-4x a
// later action on the test jobs. A rank with one micro-batch per chunk, which is what a re-balance
// leaves a slowed rank with when its peers are much faster, has no later action: its only measure
// includes the cold cost, so after it recovers it still looks slower than its history (built from
// steps with warm actions) and the detector could not clear it (the re-balance test's
// heterogeneous 1F1B case: 3/2 -> 1/4 stayed 1/4 in about one run of four).
//
// Each rank's cold factor is learned from its steps that had both: the cold actions' seconds per
// unit over the warm ones', the median of the last `window` such steps (a median: one odd step
// does not move it). A step with only cold actions is timed as its seconds per unit over that
// factor, the warm-equivalent speed the rank's history is made of. A rank's slow-down (a
// throttled or shared device) stretches its cold and warm actions alike, so the factor holds
// through one; before any step with both, the cold-inclusive time stands (what it was before).
//
// Every rank sees every rank's times after the step's reduction and runs the same arithmetic, so
// every rank's detector gets the same speeds and decides the same.
#include <cstddef>
#include <deque>
#include <vector>

#include "plait/runtime/rank_step_times.h"

namespace plait::runtime {

class ColdActionFactor {
 public:
  ColdActionFactor(int ranks, int window);

  // One step's times of every rank (in rank order): each rank's seconds per unit of work, warm
  // or warm-equivalent (0 for a rank that ran nothing), and the factors learned from this step.
  std::vector<double> seconds_per_unit(const std::vector<RankStepTimes>& ranks);

  // The rank's cold factor now (1 until a step had both cold and warm actions).
  double factor(int rank) const;

 private:
  std::size_t window_;
  std::vector<std::deque<double>> factors_;  // per rank, the last `window` steps' ratios
};

}  // namespace plait::runtime
