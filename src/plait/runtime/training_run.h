#pragma once
// A whole training run on one rank of the job: the data (training_data.h), the trainer, the
// validation loss every train.eval_every steps, checkpoints every checkpoint.every steps and at
// the end, and resuming from a checkpoint. `plait train` drives it step by step and prints; the
// tests drive it directly. Nothing here depends on the schedule family.
//
// Step s (s counted from 0) runs: the validation loss if due (before the update of s, as llm.c),
// the training step, then a checkpoint of the state after it ("step s + 1": the step a resumed
// run starts at) when s + 1 is a multiple of checkpoint.every or the run's last step. After
// the last step of train.steps one more validation runs (llm.c's last_step evaluation).
//
// A stop request (TrainerOptions::stop_requested: a preemption signal) that the reduction of
// step s carries ends the run after step s on every rank: the checkpoint of step s + 1 is saved
// (with a checkpoint section; once, if it was due anyway) and done() turns true, without the
// final validation. A request carried by the run's last step changes nothing: the run is
// complete (TrainingStep::stop_requests still says so).
//
// Every step's measured times (DistributedStepResult::ranks) go to the straggler detector
// (straggler_detector.h, the config's "stragglers" section); its decisions are the same on every
// rank (TrainingStep::stragglers). A rank flagged with data-parallel peers on its stage hands them
// micro-batches from the next step on (tier a, share_rebalancer.h; TrainingStep::rebalances).
// A flagged rank alone on its stage may instead move layers to an adjacent stage when the
// estimator says it pays (tier b, layer_mover.h and layer_transfer.h; TrainingStep::moves): the
// trainer is rebuilt on the new partition between the steps, its state carried over.
// Checkpoints record the config's plan, not the shares or partition in force (their tensors
// have global names, so a moved layout saves as any other): a resumed run starts with the plan's
// shares and partition, and the detector judges the ranks afresh.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/comm/communicator.h"
#include "plait/core/directory_lock.h"
#include "plait/core/memory_tracker.h"
#include "plait/runtime/cold_action_factor.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/layer_mover.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/share_rebalancer.h"
#include "plait/runtime/straggler_detector.h"
#include "plait/runtime/training_data.h"

namespace plait::runtime {

struct TrainingRunOptions {
  TrainerOptions trainer;
  // Resume from: a step directory, a checkpoint root (its newest complete checkpoint that
  // verifies: training_resume.h), or "" for the config's checkpoint.dir. A root that does not
  // exist or holds no complete checkpoint yet starts at step 0. Complete checkpoints in
  // checkpoint.dir newer than the start are kept aside (renamed); `latest` is repaired.
  // nullopt: start fresh (refused if checkpoint.dir already holds checkpoints).
  std::optional<std::string> resume;
  // > 0: stop before this step (saving a checkpoint there when the config has a checkpoint
  // section) without changing train.steps, the length of the learning-rate schedule. Must lie
  // after the start step and at most train.steps.
  std::int64_t stop_at = 0;
  // Resume even when the optimizer, learning-rate schedule, batch, seed or data differ from the
  // checkpoint's (resume_recipe.h; each change becomes a resume note). The model never may.
  bool allow_recipe_change = false;
};

struct TrainingStep {
  std::int64_t step = 0;
  std::optional<double> val_loss;               // validation before this step's update
  std::optional<DistributedStepResult> result;  // none for the final, validation-only pass
  std::string checkpoint;                       // the checkpoint saved after this step, or ""
  double save_seconds = 0;                      // how long saving it took
  int stop_requests = 0;                        // ranks asked to stop (DistributedStepResult)
  // train.sample_every: the sample's prompt and new tokens after this step (every rank), or empty.
  std::vector<std::int32_t> sample_prompt, sample;
  bool stopped = false;  // the run stops after this step because of them (see above)
  // Ranks the straggler detector flagged or cleared at this step (the same on every rank).
  std::vector<StragglerChange> stragglers;
  // Each rank's seconds per unit of work as the detector judged it (ColdActionFactor: a rank
  // that ran only cold actions at its warm-equivalent speed).
  std::vector<double> seconds_per_unit;
  // Micro-batch shares changed after this step (the next step runs them), and how long deciding,
  // regenerating, validating and lowering the new schedule took (the re-balance's cost).
  std::vector<ShareChange> rebalances;
  double rebalance_seconds = 0;
  // Why a re-balance decided after this step could not be applied (re-balancing stops), or "".
  std::string rebalance_failure;
  // Tier (b): a layer move considered after this step (made, with its measured time, or
  // declined, with why); the next step runs the new partition when made.
  std::vector<LayerMove> moves;
};

class TrainingRun {
 public:
  // Collective (builds the trainer). `plan` is build_pipeline_plan(job, world.size()).
  TrainingRun(const JobConfig& job, const PipelinePlan& plan, comm::Communicator& world,
              MemoryTracker& tracker, TrainingRunOptions options);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  const TrainConfig& train() const { return global_; }
  const TrainingData& data() const { return *data_; }
  DistributedTrainer& trainer() { return *trainer_; }
  // The step the run started at (0, or the checkpoint's) and the step it stops before.
  std::int64_t start_step() const { return start_; }
  std::int64_t stop_step() const { return stop_; }
  // The checkpoint resumed from, or "".
  const std::string& resumed_from() const { return resumed_from_; }
  // What resuming found and did, one line each, for the lead rank to print: newer checkpoints
  // skipped (and why) or kept aside, `latest` repaired, staging left by runs that ended during a
  // save removed, recipe changes allowed.
  const std::vector<std::string>& resume_notes() const { return notes_; }
  // Rank 0: why checkpoint.dir could not be locked (its file system lacks flock), or "".
  std::string lock_warning() const { return lock_ ? lock_->warning() : ""; }
  // Where a fresh run's parameters came from when not from the seed (init.from): "the Hugging
  // Face model in DIR (...)", or "".
  const std::string& initialised_from() const { return initialised_from_; }
  // The step-0 checkpoint of checkpoint.save_initial, or "".
  const std::string& initial_checkpoint() const { return initial_checkpoint_; }
  // Why tier (a) re-balancing cannot act on this job, or "" (ShareRebalancer::unavailable).
  const std::string& rebalance_unavailable() const { return rebalancer_.unavailable(); }
  // Why tier (b) cannot move layers in this job, or "" (LayerMover::unavailable).
  const std::string& move_unavailable() const { return mover_.unavailable(); }
  // Layers per virtual stage in force (the plan's until a move).
  const std::vector<int>& layers() const { return mover_.layers(); }
  bool done() const { return finished_; }
  // The run stopped before stop_step() because a rank was asked to (TrainingStep::stopped).
  bool stopped_by_request() const { return stopped_; }
  // The step next() runs.
  std::int64_t next_step() const { return next_; }
  // Runs the next step (collective). Requires !done().
  TrainingStep next();

  // The config a checkpoint records: the job as a config file would hold it.
  static nlohmann::json config_json(const JobConfig& job);

 private:
  std::string save(std::int64_t step);
  // Tier (b) after a step's detector decisions: asks the mover, and moves the layers (rebuilding
  // the trainer) when it says the move pays; records the move in `rec`.
  void move_layers_if_it_pays(TrainingStep& rec);
  // With --resume: the checkpoint to start from (training_resume.h), or null to start at step 0;
  // sets start_ and resumed_from_, and notes what was skipped.
  std::unique_ptr<checkpoint::CheckpointReader> open_resume_point();
  // Collective, first of all: rank 0 takes checkpoint.dir's lock (DirectoryLock), and every rank
  // throws if it could not (rank 0 the DirectoryInUseError naming the holder), so that a second
  // job on the directory stops before anything is read or written.
  void lock_checkpoint_dir();
  // Rank 0, once every rank has chosen where it starts: creates checkpoint.dir, and on a resume
  // sets the newer checkpoints aside and makes `latest` name the newest one left.
  void prepare_checkpoint_root(const std::vector<std::string>& newer);

  JobConfig job_;
  TrainConfig global_;
  comm::Communicator& world_;
  MemoryTracker& tracker_;
  TrainingRunOptions options_;
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<DistributedTrainer> trainer_;
  std::string resumed_from_, initial_checkpoint_, initialised_from_;
  std::vector<std::string> notes_;
  std::unique_ptr<DirectoryLock> lock_;  // rank 0's, for the run's life
  ColdActionFactor cold_;
  StragglerDetector stragglers_;
  ShareRebalancer rebalancer_;
  LayerMover mover_;
  std::int64_t start_ = 0, stop_ = 0, next_ = 0;
  bool final_validation_ = false;  // one more validation after the last step of train.steps
  bool finished_ = false;
  bool stopped_ = false;
};

}  // namespace plait::runtime
