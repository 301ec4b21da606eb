#pragma once
// Tier (b) of re-balancing a running job (issue 26; docs/runtime.md, "Stragglers and restarts"):
// when the straggler detector flags a rank that is alone on its pipeline stage (no data-parallel
// peer to take micro-batches, tier a's move), layers move between that stage and an adjacent one
// at a step boundary. This class decides; layer_transfer.h moves the state and rebuilds the
// trainer on the new partition (TrainingRun does both, on every rank, between steps).
//
// What it supports (anything else makes unavailable() say why, and nothing moves): one virtual
// stage per rank in pipeline order (pp >= 2 of a generated one-chunk family: 1F1B, Seq1F1B, ...),
// no data parallelism (dp 1) and no tensor parallelism, shard level 0 without offload (each
// moved tensor lives whole on one rank), both model families. Only transformer layers move; the
// embedding stays on the first stage, the final norm, head and loss (GPT-2's tied copy of the
// embedding included) on the last, and every stage keeps at least one layer. One move is in force
// at a time: from the plan's partition to a moved one, and back to the plan's when the rank is
// cleared.
//
// The estimator (why a move pays for itself). From the ranks' measured compute seconds per step
// C_r (the median of the last `consecutive` steps; an emulated device's padded time) and their
// layers L_r, a layer of stage r costs c_r = C_r / L_r (the embedding and head are folded into
// their stage's layers). A pipeline's step is paced by its slowest stage (the steady state of
// 1F1B-style schedules: each of the m micro-batches passes the bottleneck once), so moving n
// layers from the flagged stage s to a neighbour t saves at least
//   saved = max_r C_r - max_r C'_r,   C'_s = c_s (L_s - n), C'_t = c_t (L_t + n)
// per step (n and t chosen to minimise the new maximum); over the horizon (the steps left, or
// stragglers.move_horizon when smaller) the gain is saved x horizon. The move costs the bytes of
// the moved layers' parameters and both AdamW moments (12 bytes per parameter at fp32 master
// weights) over the link between the two ranks, alpha-beta (sim::LinkProfile):
//   cost = latency + bytes / bandwidth,
// the link measured when a move is considered (probe_link: a 4-byte and a 64 KiB round trip
// between the two ranks, as the stage messages travel, emulated link faults included), plus
// rebuilding the trainer on the new partition (every rank builds its stages' buffers, executor
// and schedule anew: 0.4-0.6 s on the benchmark's job, far more than its link cost), modelled as
// the slowest rank's last trainer build: the run's first, timed at its start, then each move's
// own (its seconds less its transfer). The move is made when gain > cost; otherwise it is
// declined, and logged either way. Every input is what
// every rank holds after the step's reduction plus the probe's all-reduced times, so every rank
// takes the same decision.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/rank_step_times.h"
#include "plait/runtime/straggler_detector.h"

namespace plait::runtime {

// The link between two ranks as a probe measured it: one-way seconds of a small and a large
// message (probe_link).
struct LinkProbe {
  std::size_t small_bytes = 4, large_bytes = 64 << 10;
  double small_seconds = 0, large_seconds = 0;
  double latency() const { return small_seconds; }
  // Bytes per second from the difference (the latency cancels), or, when noise makes the
  // difference vanish, the large message's bytes over the longer one-way time.
  double bytes_per_second() const;
};

// One considered move, made or declined.
struct LayerMove {
  std::int64_t step = 0;  // decided after this step; the next one runs the new partition
  int rank = 0;           // the rank whose flag or clear decided it
  bool flagged = true;    // false: cleared (the plan's partition back)
  double slowdown = 1;    // that rank's slowdown against its history then
  std::vector<int> before, after;  // layers per virtual stage
  int from = 0, to = 0, layers = 0;  // stages and the layers moved between them
  std::size_t bytes = 0;             // parameters and AdamW moments of the moved layers
  LinkProbe link;
  double rebuild_seconds = 0;    // modelled: the slowest rank's last trainer build
  double cost_seconds = 0;       // modelled: latency + bytes / bandwidth + rebuild_seconds
  double saved_per_step = 0;     // seconds, predicted
  std::int64_t horizon = 0;      // steps the saving counts over
  double gain_seconds = 0;       // saved_per_step x horizon
  bool made = false;             // false: declined (`why`)
  std::string why;
  // Measured once made (layer_transfer.h): the whole move (state out, trainer rebuilt, state in)
  // and the part spent sending and receiving.
  double seconds = 0, transfer_seconds = 0;
};

// "move layers: step 12: stage 1 -> stage 0, 2 layers (6/2 -> 8/0 ...)": the log line, with the
// estimator's figures and, when declined, why.
std::string describe(const LayerMove& move);

class LayerMover {
 public:
  // `config` the "stragglers" section (move_layers, move_horizon, consecutive).
  LayerMover(const StragglerConfig& config, const PipelinePlan& plan);

  // "" when tier (b) can act on this plan, else why it cannot (for the run's header).
  const std::string& unavailable() const { return unavailable_; }
  // Layers per virtual stage in force.
  const std::vector<int>& layers() const { return current_; }
  // The factor that turns rank r's seconds per unit of work into its plan's layers' worth (the
  // straggler detector judges a rank by its speed, not by how many layers it holds now).
  double layer_scale(int rank) const;

  // After each step, on every rank: every rank's times and the detector's changes of the step;
  // `steps_left` the steps still to run. `probe(from, to)` measures the link (collective: every
  // rank calls it with the same ranks). A considered move (made or declined), or none.
  std::optional<LayerMove> observe(std::int64_t step, const std::vector<RankStepTimes>& ranks,
                                   const std::vector<StragglerChange>& changes, std::int64_t steps_left,
                                   const std::function<LinkProbe(int, int)>& probe);
  // The move was carried out (layers() becomes its `after`).
  void applied(const LayerMove& move) { current_ = move.after; }
  // The slowest rank's last trainer build (the same on every rank: all-reduced), the rebuild
  // cost the estimator charges a move.
  void set_rebuild_seconds(double seconds) { rebuild_seconds_ = seconds; }

 private:
  // The candidate partition for a flag of `rank`: the best single move to a neighbour, with the
  // predicted per-step saving; none when nothing helps.
  std::optional<LayerMove> best_move(int rank, const std::vector<double>& per_step) const;
  std::size_t layer_bytes(int layers) const;

  StragglerConfig config_;
  spec::ModelSpec model_;
  std::string unavailable_;
  double rebuild_seconds_ = 0;
  std::vector<int> planned_, current_;
  std::vector<std::deque<double>> recent_;  // per rank: compute seconds per step, last `consecutive`
};

}  // namespace plait::runtime
