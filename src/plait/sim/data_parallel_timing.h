#pragma once
// The data-parallel part of a step, timed where the runtime runs it (runtime/sharded_chunk.h):
// each stage's collectives over its holders and the optimizer update.
//   level 3   the stage's weights are all-gathered before each holder's first use of it (the
//             gather starts at the holder's prefetch action, or at the step's start when lazy
//             gathers could deadlock); its first use waits for it: completion = the latest
//             holder's start + the all-gather's time;
//   all       the gradients are reduced (all-reduce at level 0, reduce-scatter above) from the
//             holder's last W (or BW) of the stage on, overlapping the rest of its work;
//             completion = the latest holder's start + the collective's time;
//   update    once every rank's reductions are done (the step's one scalar all-reduce of loss,
//             norm and flag is a barrier): AdamW over the rank's shard (host-side when
//             offloaded), the offloaded shard's copies (gradients to the host, weights back),
//             then at levels 1-2 the updated weights all-gathered (completion = the latest
//             holder's update end + the all-gather's time).
// Bytes: the gradients' collectives move elements x StageSync::gradient_bytes_per_element (4, or 2
// under train.grad_reduce "bf16"), the weights' all-gathers elements x weight_bytes_per_element
// (the compute copy: 4 fp32, 2 bf16).
// Collectives are rings over the holders (ring_collective_seconds): reduce-scatter and
// all-gather n-1 steps of S/n bytes each at the slowest neighbouring link, all-reduce 2(n-1).
#include <cstdint>
#include <functional>
#include <vector>

#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule.h"
#include "plait/sim/cost_model.h"
#include "plait/spec/sharded_state.h"

namespace plait::sim {

enum class Collective { all_reduce, reduce_scatter, all_gather };

// Ring collective over `holders` (ranks, in ring order) of a buffer of `bytes`:
// steps x max over neighbours (i, i+1) of transfer_seconds(i, i+1, bytes / n), steps = n-1
// (reduce-scatter, all-gather) or 2(n-1) (all-reduce); 0 for one holder.
double ring_collective_seconds(const CostModel& cost, const std::vector<int>& holders, double bytes, Collective kind);

// One virtual stage's data parallelism.
struct StageSync {
  spec::ShardPolicy policy;
  std::vector<int> holders;    // ascending ranks
  double elements = 0;         // the stage's buffer
  std::vector<double> shard;   // elements each holder updates (holders order; all of them at level 0)
  // Bytes per element as the collectives move them: the gradients (spec::dp_gradient_bytes: 4,
  // or 2 under train.grad_reduce "bf16") and the weights (spec::dp_weight_bytes: the compute copy).
  double gradient_bytes_per_element = 4;
  double weight_bytes_per_element = 4;
};

struct DataParallelModel {
  std::vector<StageSync> stages;  // per virtual stage
  // The tied embedding's all-reduce (holders of the first and the last stage, V x C gradients),
  // when the table is split over them; started by each holder after its last W of those stages.
  std::vector<int> tied_holders;
  double tied_bytes = 0;
  // Seconds of AdamW over `elements` on `rank` (on its host when `host`), and of a copy of
  // `bytes` between the rank's device and host.
  std::function<double(int rank, double elements, bool host)> optimizer_seconds;
  std::function<double(int rank, double bytes)> copy_seconds;
  // Optional: a collective's seconds as measured (instead of the ring over the cost model's
  // links), and the seconds to commit `bytes` of fresh memory (levels 2-3 commit the gradient
  // buffer every step, level 3 the gathered weights: zero-filled pages on first touch).
  std::function<double(const std::vector<int>& holders, double bytes, Collective kind)> collective_seconds;
  std::function<double(int rank, double bytes)> commit_seconds;
};

// The event simulator's bookkeeping of these collectives (event_simulator.cpp drives it): where
// in each rank's lowered program a gather starts and is waited for, and where a reduction
// starts; each collective completes at its latest holder's start + its time.
class CollectiveGates {
 public:
  CollectiveGates(const schedule::Schedule& schedule, const schedule::LoweredSchedule& lowered,
                  const DataParallelModel& model, const CostModel& cost);
  // Collectives rank `rank` starts before its program's op `op`, at time `now`. Returns the
  // ranks that may now proceed (they waited for one of these to complete).
  std::vector<int> start_before(int rank, std::int32_t op, double now);
  // Reductions rank `rank` starts after its compute op `op`, ending at `now`.
  void start_after(int rank, std::int32_t op, double now);
  // The gather rank `rank` waits for before op `op` (-1: none).
  int wait_before(int rank, std::int32_t op) const;
  // Its completion time, or < 0 while some holder has not started it (the rank then waits:
  // `waiting(rank, gate)`).
  double completion(int gate) const { return completion_[static_cast<std::size_t>(gate)]; }
  void waiting(int rank, int gate) { waiters_[static_cast<std::size_t>(gate)].push_back(rank); }
  // The step's end given each rank's last compute end: the reductions, the barrier of the
  // step's scalar all-reduce, the updates and the weights' all-gathers.
  double step_end(const std::vector<double>& finish, std::vector<double>& rank_end) const;

 private:
  int add_gate(const std::vector<int>& holders, double seconds);
  const DataParallelModel& model_;
  const CostModel& cost_;
  // Gates: gathers (one per level-3 stage), reductions (one per stage held by several ranks),
  // the tied all-reduce.
  std::vector<std::vector<int>> holders_;
  std::vector<double> seconds_, latest_start_, completion_;
  std::vector<int> started_;
  std::vector<std::vector<int>> waiters_;
  std::vector<int> reduction_of_stage_;
  int tied_gate_ = -1;
  // Per rank: op position -> gates started before it / after it, the gate waited before it.
  std::vector<std::vector<std::vector<int>>> before_, after_;
  std::vector<std::vector<int>> wait_;
  std::vector<std::vector<int>> rank_reductions_;  // gates whose completion the rank's update needs
};

}  // namespace plait::sim
