#pragma once
// Data-parallel gradient combination for one rank, as docs/runtime.md
// ("Gradients, loss and the optimizer") describes:
//
// - The gradients of a virtual stage are SUMMED over every rank holding it. Each rank's units
//   were scaled by 1 / (tokens in the global batch), so the sum is the gradient of the global
//   mean loss however unevenly the micro-batches were spread (Zorse's mixed DP groups).
// - A chunk's reduction starts as soon as its gradients are final (after the rank's last W or
//   BW of that chunk, RankProgram::finishes_chunk), as nonblocking all-reduces of buckets over
//   the stage's group, and is advanced by poll() between compute actions (OpenMPI has no
//   progress thread; docs/comm.md).
// - With tied embeddings and the embedding and head on different virtual stages, the "wte"
//   copies (one per holder of the first and of the last stage; a rank may hold both, as in ZB-V)
//   are left out of the stage reductions and summed once over all copies, then written back
//   into every copy, so they stay equal.
// - For clipping, each parameter is counted once job-wide: a stage's lowest rank contributes its
//   sum of squares, and "wte" only through the first stage.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/core/buffer.h"
#include "plait/model/stage_model.h"
#include "plait/runtime/pipeline_plan.h"

namespace plait::runtime {

class GradientReducer {
 public:
  // Collective over `world` (it creates the stage groups): every rank constructs one with the
  // same plan. chunks[c] is the rank's model of chunk c. `buffers` is charged for the tied
  // embedding's reduction buffer (comm_buffers).
  GradientReducer(const PipelinePlan& plan, int rank, comm::Communicator& world,
                  std::vector<model::StageModel*> chunks, std::size_t bucket_floats,
                  MemoryTracker& buffers);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts the reduction of chunk `chunk` (its gradients are final). Idempotent per step.
  void start_chunk(int chunk);
  // Advances every reduction in flight (call between compute actions).
  void poll();
  // Starts whatever has not started, waits for everything, writes the summed "wte" back into
  // every local copy, and resets for the next step.
  void finish();
  // This rank's share of the global sum of squares (each parameter counted once job-wide);
  // valid after finish().
  double owned_sum_of_squares() const;

  // Buckets and all-reduces issued per step (for reports).
  std::size_t buckets_per_step() const { return buckets_per_step_; }

 private:
  struct Chunk {
    model::StageModel* model = nullptr;
    int vstage = 0;
    comm::Communicator* group = nullptr;  // null: no other rank holds the stage
    std::vector<std::span<float>> buckets;
    bool owner = false;                   // counts this stage in the global norm
    std::size_t wte_offset = 0, wte_count = 0;  // the tied copy (count 0: none / not split)
    bool started = false;
  };
  void start_tied();

  std::vector<std::unique_ptr<comm::Communicator>> groups_;
  std::vector<Chunk> chunks_;
  std::vector<comm::Request> in_flight_;
  // The tied embedding: sum of this rank's copies, reduced over every copy's holder.
  comm::Communicator* tied_group_ = nullptr;
  FloatBuffer tied_sum_;
  bool tied_started_ = false;
  std::size_t buckets_per_step_ = 0;
};

}  // namespace plait::runtime
