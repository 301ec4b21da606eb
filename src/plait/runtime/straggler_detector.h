#pragma once
// Which ranks are stragglers, decided from every rank's measured step times (rank_step_times.h),
// the same decision on every rank (they all see the same reduced values). Issue 26, part 1; tier
// (a) of re-balancing acts on its flags (share_rebalancer.h; docs/runtime.md, "Stragglers and
// restarts").
//
// A rank's speed is its compute seconds per unit of work. Its baseline is the median of its last
// `window` steps judged normal (a median, so one slow step, a page-fault storm or a checkpoint
// write, does not move it). Each step the rank's slowdown against its own history is
//   history = seconds_per_unit / baseline,
// and against its peers
//   peers = history / median of the other ranks' history
// (a ratio of ratios: the ranks of a heterogeneous plan differ in speed by design, and a slowdown
// the whole job shares, a loaded host, is no rank's fault). A rank is flagged when both exceed
// `threshold` for `consecutive` steps in a row, and cleared when either falls below `clear_below`
// for as many (it is then no longer slow against one of the two; hysteresis: a rank hovering at
// the threshold does not flap). After a flag or a clear
// the rank's state holds for `cooldown` steps: a re-balancing (tier a: share_rebalancer.h) needs
// steps to show its effect before it is judged again. While a rank is suspect or flagged its
// baseline stays frozen, so a lasting straggler does not become its own history.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace plait::runtime {

// The "stragglers" section of a training config; the defaults and why.
struct StragglerConfig {
  bool enabled = true;  // measuring is free (it rides the step's reduction); detecting is cheap
  // Steps in a rank's baseline: long enough for a median to ignore a few odd steps, short enough
  // to follow slow drifts (thermal throttling, a growing data loader).
  int window = 8;
  // A rank 1.5x slower than its history and its peers costs a balanced pipeline a third of its
  // throughput (the pipeline runs at its slowest stage's pace); below that the gain of a move is
  // within the noise of a shared host's step times (measured: docs/runtime.md).
  double threshold = 1.5;
  // Cleared below this (hysteresis): half-way back from the threshold to normal speed.
  double clear_below = 1.25;
  // Steps in a row above the threshold before a flag: one or two slow steps (a save, a page-
  // fault storm, another job's burst) are not a straggler.
  int consecutive = 3;
  // Steps after a flag or clear before the rank's state may change again.
  int cooldown = 10;
  // Tier (a): a flagged rank with data-parallel peers on its stage hands micro-batches to them
  // (share_rebalancer.h). On by default: it moves no state, keeps the global batch, and costs one
  // schedule regeneration per flag or clear (measured: docs/runtime.md).
  bool rebalance = true;
  // Tier (b): a flagged rank alone on its stage moves layers to an adjacent stage when the
  // estimator says the move pays for itself (layer_mover.h): on by default for the same reason;
  // the estimator declines what would not repay its bytes over the link.
  bool move_layers = true;
  // The steps a move's saving is counted over: 0, the run's steps left (a move made near the end
  // does not repay itself); smaller to ask a move to repay itself sooner.
  int move_horizon = 0;
};

struct StragglerChange {
  std::int64_t step = 0;
  int rank = 0;
  bool flagged = true;  // false: cleared
  double vs_history = 1, vs_peers = 1;  // at the step of the change
};

class StragglerDetector {
 public:
  StragglerDetector(StragglerConfig config, int ranks);
  // One step's compute seconds per unit of work, per rank (0: the rank ran nothing; it is never
  // judged). Returns the flags and clears it decides at this step, by rank.
  std::vector<StragglerChange> observe(std::int64_t step, const std::vector<double>& seconds_per_unit);
  bool flagged(int rank) const { return ranks_.at(static_cast<std::size_t>(rank)).flagged; }
  // The last step's ratios (1 until the rank's baseline is full).
  double vs_history(int rank) const { return ranks_.at(static_cast<std::size_t>(rank)).vs_history; }
  double vs_peers(int rank) const { return ranks_.at(static_cast<std::size_t>(rank)).vs_peers; }

 private:
  struct Rank {
    std::deque<double> history;  // the baseline's steps
    bool flagged = false;
    int streak = 0;              // steps in a row beyond the line that would change the state
    std::int64_t quiet_until = -1;  // cool-down: no change before this step
    double vs_history = 1, vs_peers = 1;
  };
  StragglerConfig config_;
  std::vector<Rank> ranks_;
};

// The one line rank 0 prints for a change: "straggler: step 12: rank 1 flagged (3.02x its
// history, 2.97x its peers)".
std::string describe(const StragglerChange& change);

}  // namespace plait::runtime
