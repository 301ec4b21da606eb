#pragma once
// Data parallelism for one rank, as docs/runtime.md ("Gradients, loss and the optimizer" and
// "Sharded data parallelism") describes: one ShardedChunk per chunk the rank holds, each under
// its virtual stage's sharding policy, plus the tied embedding and the global norm.
//
// - The gradients of a virtual stage are SUMMED over every rank holding it. Each rank's units
//   were scaled by 1 / (tokens in the global batch), so the sum is the gradient of the global
//   mean loss however unevenly the micro-batches were spread (Zorse's mixed DP groups).
// - A chunk's reduction (all-reduce at level 0, reduce-scatter above) starts as soon as its
//   gradients are final (after the rank's last W or BW of that chunk), in buckets over the
//   stage's group, and is advanced by poll() between compute actions (OpenMPI has no progress
//   thread; docs/comm.md).
// - Level 3: a chunk's weights are gathered before its first action of the step (started one
//   action earlier), released after its last. When the lazy gathers could deadlock against the
//   pipeline's messages (prefetch_at_step_start), every chunk is gathered at the step's start.
// - With tied embeddings and the embedding and head on different virtual stages, the "wte"
//   copies (one per holder of the first and of the last stage; a rank may hold both, as in ZB-V)
//   are left out of the stage reductions and summed once over all copies, then written back
//   into every copy, so they stay equal (each holder then updates its shard of it alike). With
//   train.grad_reduce "bf16" the sum goes on the wire as bf16 (half the comm buffer). Under
//   tensor parallelism the copies of TP rank i are summed among themselves; when the first and
//   last stage have different TP degrees the vocabulary parts differ, and every holder's rank
//   puts its rows into a whole V x C table (zeros elsewhere) summed in fp32 over all of them.
// - train.grad_reduce "bf16": each chunk reduces a bf16 copy of its gradients (sharded_chunk.h).
// - For clipping, each parameter is counted once job-wide: at level 0 a stage's lowest rank
//   contributes its sum of squares, above it every holder its shard; "wte" only through the
//   first stage.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/core/buffer.h"
#include "plait/core/copy_engine.h"
#include "plait/model/stage_model.h"
#include "plait/optim/adamw.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/rank_program.h"
#include "plait/runtime/sharded_chunk.h"

namespace plait::runtime {

class ShardedDataParallel {
 public:
  // Collective over `world`, the job's ranks (it creates the stage groups): every rank constructs
  // one with the same plan; `rank` is its schedule rank (plan.schedule_rank_of(world.rank())). chunks[c] is the rank's model of chunk c, its parameters initialised. `buffers` is
  // charged for the tied embedding's reduction buffer (comm_buffers); `host` and `copies` are
  // the rank's host tier and copy engine (required when one of its stages offloads).
  ShardedDataParallel(const PipelinePlan& plan, int rank, comm::Communicator& world,
                      std::vector<model::StageModel*> chunks, const optim::AdamWConfig& adam,
                      std::size_t bucket_floats, MemoryTracker& buffers, MemoryTracker* host, CopyEngine* copies);
  ~ShardedDataParallel();
  ShardedDataParallel(const ShardedDataParallel&) = delete;
  ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

  // A step begins (`lr` for early level-3 updates, when `early_update`); evaluations call it too.
  void begin_step(double lr, bool early_update);
  // Level 3: starts the gather of chunk `chunk`'s weights (the executor calls it where the
  // prefetch is due). No-op at other levels or when it has started.
  void prefetch(int chunk);
  // Before compute action `s` runs (its input already received): its chunk's weights gathered,
  // its gradient buffer committed at its first weight-gradient action.
  void before_compute(const ComputeStep& s);
  // After it ran: the chunk's weights released after its last action, its reduction started
  // after its last weight-gradient action.
  void after_compute(const ComputeStep& s);
  // Starts the reduction of chunk `chunk` (its gradients are final). Idempotent per step.
  void start_chunk(int chunk);
  // Advances every reduction, gather and copy in flight (call between compute actions).
  void poll();
  // Starts whatever has not started, waits for every reduction, writes the summed "wte" back
  // into every local copy.
  void finish();
  // This rank's share of the global sum of squares (each parameter counted once job-wide);
  // valid after finish().
  double owned_sum_of_squares() const;
  // AdamW on every chunk (those not updated early) with the clip factor, and the updated weights
  // back in place on every holder; or, for a skipped step, the gradients released.
  void update(double lr, double clip_factor);
  void skip_update();

  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  ShardedChunk& chunk(int c) { return *chunks_[static_cast<std::size_t>(c)]; }
  const ShardedChunk& chunk(int c) const { return *chunks_[static_cast<std::size_t>(c)]; }
  // The stage group of chunk c (null when the rank is its only holder).
  comm::Communicator* group(int c) const { return chunks_[static_cast<std::size_t>(c)]->sharding().group; }
  // Buckets and collectives issued per step for the gradients (for reports).
  std::size_t buckets_per_step() const { return buckets_per_step_; }

 private:
  void start_tied();

  std::vector<std::unique_ptr<comm::Communicator>> groups_;
  std::vector<std::unique_ptr<ShardedChunk>> chunks_;
  // The tied embedding: sum of this rank's copies, reduced over every copy's holder.
  comm::Communicator* tied_group_ = nullptr;
  FloatBuffer tied_sum_;
  Buffer<bf16> tied_wire_;  // instead of tied_sum_ when the gradients go on the wire as bf16
  // The first and last stage's TP degrees differ: the copies are summed as whole tables
  // (tied_table_, fp32) over all their holders' job ranks; tied_tensor_ is this rank's part.
  bool tied_whole_ = false;
  FloatBuffer tied_table_;
  model::NamedTensor tied_tensor_;
  comm::Request tied_request_;
  bool tied_started_ = false, tied_done_ = false;
  std::size_t buckets_per_step_ = 0;
};

// Whether every rank may start its level-3 gathers lazily (before the action preceding each
// chunk's first use) without a deadlock against the pipeline's messages
// (schedule::lazy_gathers_deadlock_free over the plan's level-3 stages). When it does not, the
// gathers start at the step's start, which cannot deadlock (no rank waits before posting them).
bool lazy_gathers_deadlock_free(const PipelinePlan& plan, const schedule::LoweredSchedule& lowered);

}  // namespace plait::runtime
