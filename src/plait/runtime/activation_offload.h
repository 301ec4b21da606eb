#pragma once
// Activation offload in the pipeline (issue 25 part 3; PipeOffload, Wan et al. 2025): on a stage
// whose parallel.offload level is "activations" (or "all"), a unit's saved activations go to the
// rank's host tier after its F and come back before its B, through the rank's copy engine, at
// the points of schedule::activation_offloads (which units move, when each copy is submitted
// and waited for; the same table the simulator replays). What moves is the unit's
// StageModel::saved_activations, with the K/V of a micro-batch's last segment (an earlier one's
// stays for the later segments; what W needs after B is not moved again; with recomputation
// only the checkpointed inputs exist).
//
// Accounting: the host copy is charged to the host tracker (activations, kv_cache) when its copy is
// submitted; the device bytes are freed when the copy out is done (at `release`) and charged
// again when the copy back is submitted (at `prefetch`), so the device tracker's peak is the
// simulator's. The copies are byte copies: the B reads exactly what F wrote, and training is
// bitwise that without offload.
//
// One thread of control (the executor's); the copy engine's worker only moves bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "plait/core/copy_engine.h"
#include "plait/core/memory_tracker.h"
#include "plait/model/stage_model.h"
#include "plait/model/tensor_pool.h"
#include "plait/runtime/rank_program.h"
#include "plait/schedule/activation_offload.h"

namespace plait::runtime {

class ActivationOffload {
 public:
  // chunk_offloads[c]: whether chunk c's stage offloads its activations; segments: the
  // sequence's segment count (the last segment's K/V moves too); host: the rank's host tier (its
  // tracker is charged, in each buffer's category); copies: the rank's copy engine.
  ActivationOffload(const RankProgram& program, std::vector<model::StageModel*> chunks,
                    const std::vector<bool>& chunk_offloads, int segments, MemoryTracker& host, CopyEngine& copies);
  ~ActivationOffload();
  ActivationOffload(const ActivationOffload&) = delete;
  ActivationOffload& operator=(const ActivationOffload&) = delete;

  // Before compute action i, its input in hand: finishes the copies out due (waiting for them),
  // submits the copies back due, and, if i is the B of a moved unit, waits for its copy back.
  void before(std::size_t i);
  // After compute action i: if it is the F of a unit that moves, submits its copy out.
  void after(std::size_t i);

  bool empty() const { return units_.empty(); }
  // Seconds the compute thread waited for copies, bytes moved each way: since construction.
  double wait_seconds() const { return wait_seconds_; }
  double bytes_out() const { return bytes_out_; }

 private:
  struct Moving;
  void wait(CopyEvent event);

  std::vector<model::StageModel*> chunks_;
  std::vector<schedule::UnitOffload> units_;
  schedule::OffloadPoints points_;
  int segments_;
  CopyEngine& copies_;
  model::TensorPool host_pool_;
  std::vector<Moving> moving_;  // per unit of units_
  double wait_seconds_ = 0, bytes_out_ = 0;
};

}  // namespace plait::runtime
