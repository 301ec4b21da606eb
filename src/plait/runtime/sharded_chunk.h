#pragma once
// One chunk (virtual stage) of a rank under its stage's sharding policy (spec/sharded_state.h):
// where its weights, gradients and AdamW state live in each phase of a step, and the
// collectives and copies that move them. The rank's ShardedDataParallel drives it from the
// executor (gather before the first use, release after the last, gradient buffer committed at
// the first weight-gradient action, reduction after the last) and from the trainer (update).
//
//   level 0  gradients all-reduced in buckets; AdamW over every element on every holder (plain
//            data parallelism);
//   level 1  gradients reduce-scattered in buckets (each holder's block reduced in place),
//            AdamW over the rank's shard, updated weights all-gathered in buckets;
//   level 2  as 1, and the gradient buffer is committed (zero) at the chunk's first W or BW of
//            the step and keeps only the shard resident once reduced, released after the update;
//   level 3  as 2, and between uses only the shard of the weights is resident (in place): the
//            chunk is all-gathered once per step, before its first action (prefetched one action
//            earlier), released back to the shard after its last; no all-gather after the update.
//            Without gradient clipping and with train.on_nonfinite "abort" (so the update depends
//            on no other chunk), its AdamW step runs as soon as its gradients are reduced.
// Offload (any level): the AdamW moments and an fp32 master copy of the rank's shard live in the
// host tier; the reduced gradient shard goes there through the copy engine as soon as it is
// reduced; AdamW runs on the host; the updated shard comes back (levels 0-2; at level 3 the
// host master IS the parked shard and is copied in when the chunk is gathered).
//
// The reduction's wire type (train.grad_reduce): fp32, the gradient buckets reduced in place; bf16,
// each bucket rounded into a bf16 wire copy of the chunk's gradients (comm_buffers, from the
// reduction's start until it is done), reduced there (comm/bf16_sum.h), and the rank's reduced
// part widened back into the fp32 gradients before anything reads them (norm, AdamW, staging).
//
// The tied embedding's gradient (a "wte" copy on the head stage, with the embedding on another
// stage) is left out of the stage's reduction: the rank's ShardedDataParallel sums every copy
// over every holder of either stage and writes the sum back (tied_written()).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/core/buffer.h"
#include "plait/core/copy_engine.h"
#include "plait/core/memory_tracker.h"
#include "plait/model/stage_model.h"
#include "plait/optim/adamw.h"
#include "plait/spec/precision_policy.h"
#include "plait/spec/sharded_state.h"

namespace plait::runtime {

// What a chunk needs to know of its stage's group.
struct ChunkSharding {
  spec::ShardPolicy policy;
  comm::Communicator* group = nullptr;  // the stage's holders; null when the rank is the only one
  std::vector<std::int64_t> bounds;     // shard bounds over the holders (group order), spec::shard_bounds
  int index = 0;                        // this rank's place among the holders
  // The tied "wte" range of the chunk's buffer (count 0: none), reduced by the tied group.
  std::size_t tied_offset = 0, tied_count = 0;
  // Whether the chunk's copy of the tied table counts in the global norm (the embedding stage's
  // does; the head stage's equal copy does not).
  bool counts_tied = true;
  // Ranges [offset, offset + count) of the chunk's buffer left out of the global norm, sorted
  // and disjoint: the head stage's tied copy (unless counts_tied) and, on TP ranks other than
  // 0, the tensors every rank of the TP group holds whole (model::StageModel::counts_in_norm).
  std::vector<std::pair<std::size_t, std::size_t>> norm_excluded;
  // train.grad_reduce "bf16": the gradients go on the wire as bf16 (spec/precision_policy.h).
  spec::GradReduce grad_reduce = spec::GradReduce::fp32;
};

class ShardedChunk {
 public:
  // The model's parameters must be initialised (or about to be restored); the chunk takes its
  // shard from them. `host` and `copies` are required when the policy offloads.
  // `buffers` is charged for the bf16 wire copy (comm_buffers; required with grad_reduce bf16).
  ShardedChunk(model::StageModel& model, ChunkSharding sharding, const optim::AdamWConfig& adam,
               std::size_t bucket_floats, MemoryTracker* host, CopyEngine* copies,
               MemoryTracker* buffers = nullptr);
  ~ShardedChunk();
  ShardedChunk(const ShardedChunk&) = delete;
  ShardedChunk& operator=(const ShardedChunk&) = delete;

  model::StageModel& model() { return model_; }
  const spec::ShardPolicy& policy() const { return s_.policy; }
  const ChunkSharding& sharding() const { return s_; }
  // The rank's shard [begin, end) of the chunk's buffer (everything at level 0).
  std::int64_t shard_begin() const { return begin_; }
  std::int64_t shard_end() const { return end_; }

  // A step begins: `lr` for an early level-3 update, allowed when `early_update`.
  void begin_step(double lr, bool early_update);
  // Level 3: commits the weights and starts their gather (after copying the host master in,
  // when offloaded); no-op when already gathered or at lower levels.
  void start_gather();
  // Level 3: returns once the weights are gathered (starting the gather if it has not started).
  void wait_gathered();
  // Level 3: after the chunk's last action of the step, back to the resident shard.
  void release_parameters();
  // Level 2-3: the gradient buffer, zero, before the first weight-gradient action.
  void commit_gradients();
  // After the last weight-gradient action: starts the reduction of the gradients (the tied range
  // excepted).
  void start_reduction();
  bool reduction_started() const { return reduction_started_; }
  // The tied range holds its summed gradient (call once per step when the chunk has one, after
  // start_reduction).
  void tied_written();
  // Advances reductions, copies and an early update (between compute actions).
  void poll();
  // Waits until the gradients are reduced (and staged on the host when offloaded).
  void finish_reduction();

  // This rank's share of the global sum of squares of the reduced gradients: its shard (level
  // >= 1), or the whole chunk on the stage's lowest holder (level 0); the head stage's tied copy
  // left out. Valid after finish_reduction().
  double sum_of_squares() const;
  // The first tensor (index into model().tensors()) holding a non-finite reduced gradient in the
  // rank's part, and its kind (1 NaN, 2 infinite).
  std::optional<std::size_t> first_nonfinite(int& kind) const;

  // The update: AdamW over the rank's part (unless done early), then the updated weights back in
  // place (levels 0-2: copied in from the host when offloaded, all-gathered at levels 1-2).
  // start_update does not wait for the all-gather; finish_update does, and releases the step's
  // gradients (levels 2-3) and staging.
  void start_update(double lr, double clip_factor);
  void finish_update();
  // A skipped step (non-finite): no update; the step's gradients are released.
  void skip_update();

  optim::AdamW& optimizer() { return *optimizer_; }
  const optim::AdamW& optimizer() const { return *optimizer_; }
  // The rank's shard of the weights where the optimizer keeps them: the host master (offload),
  // else the device buffer's shard range.
  std::span<float> shard_parameters();
  // Whether this rank's fp32 master is only its shard (or lives on the host): offload, level 3,
  // or bf16 at level >= 1 (mixed precision's master is optimizer state, sharded with it).
  bool master_sharded() const;
  // Whether the device's fp32 buffer holds the whole stage between steps: fp32 below level 3
  // (the kernels read it; an offloaded master is a host copy of its shard), bf16 only while the
  // master is whole on the device.
  bool device_fp32_whole() const { return bf16_ ? !master_sharded() : !s_.policy.shards_parameters(); }
  // bf16: whether the compute copy is the resident shard between uses (level 3).
  bool compute_copy_sharded() const { return bf16_ && s_.policy.shards_parameters(); }
  // Counts of each holder's block (the shard sizes), for gathers.
  std::vector<std::size_t> block_counts() const;

 private:
  struct Bucket {
    std::size_t begin = 0, end = 0;
    std::vector<std::size_t> counts;  // per holder: its shard's overlap with [begin, end)
  };
  std::vector<Bucket> make_buckets(std::size_t begin, std::size_t end, std::size_t bucket_floats) const;
  // The reduced gradients of the rank's part: on the host when staged, else the device buffer.
  std::span<const float> reduced_gradients() const;
  void on_reduced();       // buckets and tied range done: stage / retain / early update
  // bf16 wire: where gradient element i (outside the tied range) sits in wire_.
  std::size_t wire_index(std::size_t i) const { return i >= s_.tied_offset + s_.tied_count ? i - s_.tied_count : i; }
  void widen_reduced();    // bf16 wire: the rank's reduced part back into the fp32 gradients
  void on_staged();        // the gradient shard is on the host
  void run_optimizer(double lr, double clip_factor);
  void start_weight_gather();  // the collective part of a level-3 gather
  // bf16: rounds the updated master shard into the compute copy's shard where it is resident.
  void refresh_copy_shard();
  // All-gathers of the weights the kernels read (fp32 weights or the bf16 copy), in buckets.
  void gather_compute_weights(std::vector<comm::Request>& into);

  model::StageModel& model_;
  ChunkSharding s_;
  bool bf16_ = false;  // mixed precision: the kernels read the model's bf16 copy of the master
  MemoryTracker* host_;
  CopyEngine* copies_;
  MemoryTracker* buffers_;
  bool bf16_wire_ = false;  // grad_reduce bf16 over a group
  std::int64_t begin_ = 0, end_ = 0;
  std::vector<Bucket> gradient_buckets_, weight_buckets_;
  FloatBuffer master_;        // host: fp32 master of the shard (offload)
  FloatBuffer staged_;        // host: the reduced gradient shard (offload)
  std::unique_ptr<optim::AdamW> optimizer_;

  // Per step.
  double lr_ = 0;
  bool early_update_ = false;
  bool gathered_ = false, gather_collective_started_ = false;
  std::vector<comm::Request> gather_;
  bool reduction_started_ = false, tied_done_ = false, reduced_ = false;
  std::vector<comm::Request> reduction_;
  Buffer<bf16> wire_;  // bf16 wire: the chunk's gradients but the tied range, while reduced
  std::optional<CopyEvent> stage_copy_;
  bool staged_ok_ = false;
  bool updated_ = false;
  std::vector<comm::Request> weight_gather_;
};

}  // namespace plait::runtime
