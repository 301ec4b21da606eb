#include "plait/runtime/distributed_trainer.h"

#include <string>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/optim/grad_clip.h"

namespace plait::runtime {

DistributedTrainer::DistributedTrainer(const PipelinePlan& plan, const TrainConfig& train,
                                       comm::Communicator& world, MemoryTracker& tracker,
                                       const TrainerOptions& options)
    : plan_(plan),
      train_(train),
      world_(world),
      rank_(world.rank()),
      options_(options),
      schedule_{train.lr, train.min_lr, train.warmup_steps, train.steps} {
  if (world.size() != plan_.num_ranks()) {
    throw Error("the plan has " + std::to_string(plan_.num_ranks()) + " ranks, the job " +
                std::to_string(world.size()));
  }
  if (train.microbatches != plan_.global_microbatches() || train.seq != plan_.seq ||
      train.microbatch_size != plan_.microbatch_size) {
    throw Error("the train config (" + std::to_string(train.microbatches) + " micro-batches of " +
                std::to_string(train.microbatch_size) + " x " + std::to_string(train.seq) +
                ") is not the plan's global batch (" + std::to_string(plan_.global_microbatches()) +
                " of " + std::to_string(plan_.microbatch_size) + " x " + std::to_string(plan_.seq) + ")");
  }
  const DeviceEmulation& device = plan_.devices[static_cast<std::size_t>(rank_)];
  if (device.memory_bytes) tracker.set_capacity(device.memory_bytes);
  MemoryTracker& buffers = options.buffer_tracker ? *options.buffer_tracker : tracker;

  std::vector<model::StageModel*> chunks;
  for (std::int32_t v : plan_.schedule.layout.rank_vstages[static_cast<std::size_t>(rank_)]) {
    auto m = std::make_unique<model::StageModel>(plan_.model, plan_.vstage_specs[static_cast<std::size_t>(v)],
                                                 tracker);
    // Initialisation is a function of (seed, tensor name), so every holder of a stage, and the
    // single-process reference, start from the same parameters.
    m->init_parameters(train.seed);
    optimizers_.push_back(std::make_unique<optim::AdamW>(
        m->parameters(), optim::param_ranges(m->tensors()),
        optim::AdamWConfig{train.beta1, train.beta2, train.eps, train.weight_decay}, tracker));
    chunks.push_back(m.get());
    models_.push_back(std::move(m));
  }
  lowered_ = lower_plan(plan_, options.recv_lookahead);
  reducer_ = std::make_unique<GradientReducer>(plan_, rank_, world, chunks, options.bucket_floats, buffers);
  executor_ = std::make_unique<PipelineExecutor>(
      plan_, make_rank_program(plan_, lowered_, rank_, world.max_tag()), world, chunks, *reducer_,
      buffers);
}

DistributedTrainer::~DistributedTrainer() = default;

DistributedStepResult DistributedTrainer::step(std::int64_t step, const data::BatchSource& batches) {
  if (batches.seq() != plan_.seq || batches.microbatch_size() != plan_.microbatch_size ||
      batches.microbatches_per_step() != plan_.global_microbatches()) {
    throw Error("the batch source gives " + std::to_string(batches.microbatches_per_step()) +
                " micro-batches of " + std::to_string(batches.microbatch_size()) + " x " +
                std::to_string(batches.seq()) + " tokens; the plan's global batch is " +
                std::to_string(plan_.global_microbatches()) + " of " +
                std::to_string(plan_.microbatch_size) + " x " + std::to_string(plan_.seq));
  }
  for (auto& m : models_) m->zero_gradients();
  // A common time origin for the step's timeline (the ranks' clocks are the host's monotonic
  // clock on one machine; across machines each rank's origin is its own barrier exit).
  world_.barrier();
  const double start = monotonic_seconds();
  ExecutedStep executed = executor_->run(step, batches, start, options_.record_events, options_.failure);
  reducer_->finish();

  DistributedStepResult r;
  r.loss = world_.allreduce(executed.loss, comm::ReduceOp::kSum);
  const double sum_sq = world_.allreduce(reducer_->owned_sum_of_squares(), comm::ReduceOp::kSum);
  const optim::ClipResult clip = optim::clip_by_global_norm({&sum_sq, 1}, train_.grad_clip);
  r.grad_norm = clip.norm;
  r.clip_factor = clip.factor;
  r.lr = schedule_.at(static_cast<int>(step));
  for (std::size_t c = 0; c < models_.size(); ++c) {
    optimizers_[c]->step(models_[c]->gradients(), r.lr, clip.factor);
  }
  r.step_seconds = monotonic_seconds() - start;
  r.pipeline_seconds = executed.finish_seconds;
  r.busy_seconds = executed.busy_seconds;
  r.events = std::move(executed.events);
  return r;
}

}  // namespace plait::runtime
