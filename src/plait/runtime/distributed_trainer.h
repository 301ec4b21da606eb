#pragma once
// One rank of a pipeline x data-parallel training job. It holds one StageModel per chunk
// (virtual stage) the plan gives the rank, each with its AdamW state under its stage's sharding
// policy (ShardedDataParallel, ShardedChunk), and runs optimizer steps:
//   barrier -> PipelineExecutor (the rank's actions; level-3 gathers before each chunk's first
//   use; gradient reductions start as chunks finish) -> ShardedDataParallel::finish -> loss,
//   squared norm, a non-finite flag, a stop-request flag and every rank's step times
//   (rank_step_times.h) all-reduced over the job -> (non-finite: stop or skip,
//   train.on_nonfinite) -> clip factor -> AdamW on each rank's part with the warm-up + cosine
//   learning rate, updated weights all-gathered where sharded.
// and forward-only evaluations (validation loss) through the same pipeline.
// Every rank of the job constructs one with the same plan (construction is collective: it makes
// the stage groups). The result equals runtime::LocalTrainer on the same global batch within
// fp32 reassociation (tests/runtime/equivalence_test.cpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/core/memory_tracker.h"
#include "plait/data/batch_source.h"
#include "plait/model/stage_model.h"
#include "plait/optim/adamw.h"
#include "plait/optim/lr_schedule.h"
#include "plait/runtime/collective_error.h"
#include "plait/core/thread_copy_engine.h"
#include "plait/runtime/sharded_data_parallel.h"
#include "plait/runtime/pipeline_executor.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/rank_step_times.h"
#include "plait/runtime/train_config.h"
#include "plait/trace/event.h"

namespace plait::runtime {

// How receives are posted when no window is asked for: one compute action ahead (see
// TrainerOptions::recv_lookahead).
inline constexpr std::int32_t kDefaultRecvLookahead = 1;

struct TrainerOptions {
  // Receives are posted this many compute actions before the action that consumes them
  // (schedule::LowerOptions::recv_lookahead; INT32_MAX posts a whole step's receives at its
  // start). Correctness does not depend on it (sends never block); memory does: every posted
  // receive holds a comm_buffers block. The default keeps at most two actions' inputs posted.
  std::int32_t recv_lookahead = kDefaultRecvLookahead;
  // Gradient all-reduce bucket size, floats.
  std::size_t bucket_floats = std::size_t{1} << 20;
  // Where comm buffers are charged; null: the rank's tracker (the memory benchmark passes its
  // own, so the rank's tracker holds exactly the model's memory).
  MemoryTracker* buffer_tracker = nullptr;
  // Record the timed events of every step (ExecutedStep::events).
  bool record_events = false;
  FailureInjection failure;
  // Whether this rank was asked to stop (a stop signal: core/stop_signals.h), read once per step
  // just before the step's reduction of the loss and norm, which carries it: every rank learns
  // how many ranks were asked (DistributedStepResult::stop_requests) at no extra round trip.
  // Empty: never.
  std::function<bool()> stop_requested;
};

struct DistributedStepResult {
  double loss = 0;         // mean cross-entropy over the global batch (all-reduced)
  double grad_norm = 0;    // global gradient norm before clipping
  double clip_factor = 1;
  double lr = 0;
  double step_seconds = 0;      // this rank: barrier to the end of the optimizer step
  double pipeline_seconds = 0;  // this rank: end of its last compute action, from the step start
  double busy_seconds = 0;      // this rank: compute (with emulation padding)
  // Every job rank's measurements of this step (index: job rank; the same on every rank), carried
  // by the step's reduction of the loss and norm (rank_step_times.h).
  std::vector<RankStepTimes> ranks;
  std::vector<trace::Event> events;  // this rank's, when recorded
  // The loss or a gradient was NaN or infinite: what and where (the same text on every rank),
  // and, with train.on_nonfinite "skip", the optimizer update was skipped (with "abort" the step
  // throws NonFiniteStepError instead of returning).
  std::string nonfinite;
  bool skipped = false;
  // Ranks whose stop_requested() was true at the step's reduction (the same on every rank).
  int stop_requests = 0;
};

// A step whose loss or gradients were not finite, under train.on_nonfinite "abort". Every rank
// throws it with the same message (the decision comes from reduced values).
class NonFiniteStepError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

class DistributedTrainer {
 public:
  // `train` is the global train config (JobConfig::global_train()). The tracker's capacity is set
  // from the rank's emulated device when the plan gives one; the rank's host tier (host_tracker)
  // gets the device's host_memory_bytes.
  // Tensor parallelism (plan.rank_tensor_parallel): `world` has plan.world_size() ranks; job
  // rank j is TP rank plan.tp_rank_of(j) of the schedule's rank plan.schedule_rank_of(j) (a
  // schedule rank r of degree t_r holds job ranks [base_r, base_r + t_r)). Construction makes the
  // TP groups (the t_r consecutive job ranks of each schedule rank of degree > 1) and the group
  // of the schedule's leaders (TP rank 0 of every schedule rank); pipeline messages (resharded
  // between stages of different degrees, runtime/reshard.h) and data-parallel reductions (one
  // group per stage and TP rank) go over `world`; every rank's stages are its TP rank's part
  // (model/tensor_parallel.h).
  DistributedTrainer(const PipelinePlan& plan, const TrainConfig& train, comm::Communicator& world,
                     MemoryTracker& tracker, const TrainerOptions& options = {});
  ~DistributedTrainer();
  // The executor refers to the plan held here: neither copied nor moved.
  DistributedTrainer(const DistributedTrainer&) = delete;
  DistributedTrainer& operator=(const DistributedTrainer&) = delete;

  DistributedStepResult step(std::int64_t step, const data::BatchSource& batches);
  // Runs `schedule` from the next step on (a re-balance of micro-batch shares, share_rebalancer.h):
  // the plan's layout and global batch, other ranks for some micro-batches; validated by the
  // caller. Every rank must switch at the same step boundary, to the same schedule. Stages,
  // parameters, optimizer state and the emulated device's speed stay; evaluation follows.
  void reschedule(schedule::Schedule schedule);
  // The emulated device's slow-down and the emulated link of the rank's sends, as injected so far
  // (FailureInjection kSlow, kLink): a trainer rebuilt by a layer move (layer_transfer.h) keeps
  // them.
  double device_slowdown() const { return executor_->device_slowdown(); }
  void set_device_slowdown(double slowdown) { executor_->set_device_slowdown(slowdown); }
  LinkEmulator& link() { return executor_->link(); }
  // Whether the next steps record their timed events (DistributedStepResult::events).
  void set_record_events(bool on) { options_.record_events = on; }

  // The mean loss over `batches` batches of the global batch's shape, forward only, through the
  // same pipeline (the F actions of the schedule, forward_only_plan): batch r is "step" r of
  // `source`, whose micro-batch g any rank fills alike. Collective; the result is the same on
  // every rank. `step` (the training step it runs at) only matters for failure injection.
  double evaluate(std::int64_t step, const data::BatchSource& source, int batches);

  // Optimizer updates taken so far (steps minus skipped ones; AdamW's bias correction count),
  // the same for every chunk; restored from checkpoints.
  int optimizer_steps() const;
  void set_optimizer_steps(int steps);
  // This rank's number in the schedule (the job rank without TP).
  int rank() const { return rank_; }
  // Tensor parallelism: this rank's degree (its schedule rank's), its place in its TP group, the
  // group (null at degree 1) and the communicator of the schedule's ranks, one job rank each:
  // their TP rank 0 (the job's world without TP; null on the other TP ranks).
  int tensor_parallel() const { return plan_.tensor_parallel(rank_); }
  int tp_rank() const { return tp_rank_; }
  comm::Communicator* tp_communicator() { return tp_comm_; }
  comm::Communicator* schedule_world() { return logical_; }
  const PipelinePlan& plan() const { return plan_; }
  int num_chunks() const { return static_cast<int>(models_.size()); }
  model::StageModel& chunk(int c) { return *models_[static_cast<std::size_t>(c)]; }
  // The executor of the training steps (its activation offload: runtime/activation_offload.h).
  const PipelineExecutor& pipeline() const { return *executor_; }
  // Chunk c's AdamW: over the rank's shard of it (the whole chunk at level 0), its moments the
  // shard's.
  optim::AdamW& optimizer(int c) { return dp_->chunk(c).optimizer(); }
  ShardedDataParallel& data_parallel() { return *dp_; }
  // The rank's host memory tier (offloaded optimizer state, parked level-3 weights).
  MemoryTracker& host_tracker() { return *host_; }
  // Every chunk's full weights, gathered from the shards where they are sharded (collective
  // over each chunk's stage group: every holder calls it), in chunk order.
  std::vector<std::vector<float>> gather_parameters();
  const schedule::LoweredSchedule& lowered() const { return lowered_; }

 private:
  PipelinePlan plan_;
  TrainConfig train_;
  comm::Communicator& world_;
  std::vector<std::unique_ptr<comm::Communicator>> tp_groups_;  // TP: this rank's groups
  comm::Communicator* tp_comm_ = nullptr;
  comm::Communicator* logical_ = nullptr;  // the schedule's leaders (schedule_world())
  std::unique_ptr<model::TensorParallelGroup> tp_group_;
  int tp_rank_ = 0;
  int rank_;
  TrainerOptions options_;
  optim::LRSchedule schedule_;
  std::vector<std::unique_ptr<model::StageModel>> models_;
  std::unique_ptr<MemoryTracker> host_;
  std::unique_ptr<ThreadCopyEngine> copies_;  // only when a chunk offloads
  schedule::LoweredSchedule lowered_;
  std::unique_ptr<ShardedDataParallel> dp_;
  std::unique_ptr<PipelineExecutor> executor_;
  // Evaluation: built on first use.
  PipelinePlan eval_plan_;
  schedule::LoweredSchedule eval_lowered_;
  std::unique_ptr<PipelineExecutor> eval_executor_;
  MemoryTracker* buffers_ = nullptr;

  // The message of a non-finite step: which ranks' losses and which stages' gradients.
  std::string describe_nonfinite(std::int64_t step, bool local_loss_bad);
};

}  // namespace plait::runtime
