#include "plait/runtime/distributed_trainer.h"

#include <cmath>
#include <string>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"
#include "plait/data/document_mask.h"
#include "plait/data/fixed_step_source.h"
#include "plait/optim/grad_clip.h"
#include "plait/runtime/rank_gather.h"
#include "plait/runtime/tensor_parallel_group.h"

namespace plait::runtime {
namespace {

const char* kind_name(int kind) { return kind == 1 ? "NaN" : "infinite"; }

}  // namespace

DistributedTrainer::DistributedTrainer(const PipelinePlan& plan, const TrainConfig& train,
                                       comm::Communicator& world, MemoryTracker& tracker,
                                       const TrainerOptions& options)
    : plan_(plan),
      train_(train),
      world_(world),
      rank_(world.rank()),
      options_(options),
      schedule_{train.lr, train.min_lr, train.warmup_steps, train.steps} {
  if (world.size() != plan_.world_size()) {
    std::string degrees;
    if (plan_.any_tensor_parallel()) {
      for (int r = 0; r < plan_.num_ranks(); ++r) degrees += (r ? " + " : " (") + std::to_string(plan_.tensor_parallel(r));
      degrees += ", the schedule ranks' tensor-parallel degrees)";
    }
    throw Error("the plan has " + std::to_string(plan_.world_size()) + " ranks" + degrees + ", the job " +
                std::to_string(world.size()));
  }
  // Job rank j is TP rank j - base_r of schedule rank r, base_r <= j < base_r + t_r (TP
  // innermost: a TP group is consecutive ranks, one machine; PipelinePlan::first_job_rank).
  rank_ = plan_.schedule_rank_of(world.rank());
  tp_rank_ = plan_.tp_rank_of(world.rank());
  logical_ = &world;
  if (plan_.any_tensor_parallel()) {
    // One call makes every group, the same list on every rank: the TP group of each schedule rank
    // of degree > 1, then the schedule's leaders (TP rank 0 of every schedule rank: the per-rank
    // gathers of measurements, schedule_world()).
    std::vector<std::vector<int>> lists;
    std::vector<int> tp_list(static_cast<std::size_t>(plan_.num_ranks()), -1);
    for (int r = 0; r < plan_.num_ranks(); ++r) {
      if (plan_.tensor_parallel(r) == 1) continue;
      tp_list[static_cast<std::size_t>(r)] = static_cast<int>(lists.size());
      std::vector<int>& g = lists.emplace_back();
      for (int i = 0; i < plan_.tensor_parallel(r); ++i) g.push_back(plan_.job_rank(r, i));
    }
    const auto leaders_list = lists.size();
    std::vector<int>& leaders = lists.emplace_back();
    for (int r = 0; r < plan_.num_ranks(); ++r) leaders.push_back(plan_.first_job_rank(r));
    std::vector<std::unique_ptr<comm::Communicator>> groups = world.create_groups(lists);
    const int mine = tp_list[static_cast<std::size_t>(rank_)];
    if (mine >= 0) tp_comm_ = groups[static_cast<std::size_t>(mine)].get();
    logical_ = groups[leaders_list].get();  // null off the leaders
    for (auto& g : groups) {
      if (g) tp_groups_.push_back(std::move(g));
    }
    if (tp_comm_ != nullptr) tp_group_ = std::make_unique<CommTensorParallelGroup>(*tp_comm_);
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
  buffers_ = &buffers;

  host_ = std::make_unique<MemoryTracker>(device.host_memory_bytes, MemoryTier::kHost);

  std::vector<model::StageModel*> chunks;
  bool offloads = false;
  for (std::int32_t v : plan_.schedule.layout.rank_vstages[static_cast<std::size_t>(rank_)]) {
    model::StageSpec spec = plan_.vstage_specs[static_cast<std::size_t>(v)];
    spec.tp_rank = tp_rank_;
    auto m = std::make_unique<model::StageModel>(plan_.model, spec, tracker, kernels::cpu_backend(),
                                                 tp_group_.get());
    // Initialisation is a function of (seed, tensor name), so every holder of a stage, and the
    // single-process reference, start from the same parameters.
    m->init_parameters(train.seed);
    offloads = offloads || (!plan_.vstage_shard.empty() && plan_.vstage_shard[static_cast<std::size_t>(v)].offload) ||
               plan_.offloads_activations(v);
    chunks.push_back(m.get());
    models_.push_back(std::move(m));
  }
  // Paced to the device's host link when the plan gives one (core/thread_copy_engine.h).
  if (offloads) copies_ = std::make_unique<ThreadCopyEngine>(device.host_bytes_per_second.value_or(0.0));
  lowered_ = lower_plan(plan_, options.recv_lookahead);
  dp_ = std::make_unique<ShardedDataParallel>(plan_, rank_, world_, chunks,
                                              optim::AdamWConfig{train.beta1, train.beta2, train.eps, train.weight_decay},
                                              options.bucket_floats, buffers, host_.get(), copies_.get());
  executor_ = std::make_unique<PipelineExecutor>(
      plan_, make_rank_program(plan_, lowered_, rank_, world_.max_tag()), world_, chunks, *dp_, buffers,
      ExecutorMode::kTrain, host_.get(), copies_.get());
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
  for (auto& m : models_) m->zero_gradients();  // (level 2-3 buffers commit zero-filled instead)
  const double lr = schedule_.at(static_cast<int>(step));
  // A level-3 chunk may take its AdamW step as soon as its gradients are reduced only when the
  // update depends on no other chunk: no clipping by the global norm, and a non-finite step
  // stops the job rather than skipping the update everywhere.
  dp_->begin_step(lr, train_.grad_clip <= 0 && train_.on_nonfinite == TrainConfig::OnNonFinite::kAbort);
  note_progress("step " + std::to_string(step) + ": the barrier that starts it");
  // A common time origin for the step's timeline (the ranks' clocks are the host's monotonic
  // clock on one machine; across machines each rank's origin is its own barrier exit).
  const double barrier_from = monotonic_seconds();
  world_.barrier();
  const double start = monotonic_seconds();
  ExecutedStep executed = executor_->run(step, batches, start, options_.record_events, options_.failure);
  note_progress("step " + std::to_string(step) + ": finishing the gradient reductions, then the loss and norm");
  const double finish_from = monotonic_seconds();
  dp_->finish();
  executed.times.collective_wait_seconds = (start - barrier_from) + (monotonic_seconds() - finish_from);

  DistributedStepResult r;
  // One reduction for the loss, the squared norm, a flag of this rank's non-finite values and a
  // flag of a stop request (a preemption signal). The decisions below depend only on the reduced
  // values, so every rank takes the same ones: a signal that reached one rank, or the ranks at
  // different moments, stops them all after the same step.
  // Over the whole job: under TP every rank of a head stage's group has the same loss (the
  // vocabulary-parallel cross-entropy reduces it), so TP rank 0's counts; the squared norm leaves
  // out what another rank of the group counts (ShardedChunk's norm_excluded).
  const double owned_sq = dp_->owned_sum_of_squares();
  const bool local_loss_bad = !std::isfinite(executed.loss);
  const bool stop = options_.stop_requested && options_.stop_requested();
  // Then each rank's step times in its own slot of zeros (the sums are exact: one non-zero term
  // each), so the straggler detector sees every rank's at no extra round trip.
  const std::size_t n = static_cast<std::size_t>(world_.size());
  std::vector<double> sums(4 + n * kRankStepFields, 0.0);
  sums[0] = tp_rank_ == 0 ? executed.loss : 0.0;
  sums[1] = owned_sq;
  sums[2] = local_loss_bad || !std::isfinite(owned_sq) ? 1.0 : 0.0;
  sums[3] = stop ? 1.0 : 0.0;
  pack(executed.times, std::span<double>(sums).subspan(4 + static_cast<std::size_t>(world_.rank()) * kRankStepFields,
                                                        kRankStepFields));
  world_.allreduce(std::span<double>(sums), comm::ReduceOp::kSum);
  for (std::size_t j = 0; j < n; ++j) {
    r.ranks.push_back(unpack_rank_step_times(std::span<const double>(sums).subspan(4 + j * kRankStepFields, kRankStepFields)));
  }
  r.stop_requests = static_cast<int>(sums[3]);
  r.loss = sums[0];
  const double sum_sq = sums[1];
  const optim::ClipResult clip = optim::clip_by_global_norm({&sum_sq, 1}, train_.grad_clip);
  r.grad_norm = clip.norm;
  r.clip_factor = clip.factor;
  r.lr = lr;
  if (sums[2] != 0 || !std::isfinite(sums[0]) || !std::isfinite(sums[1])) {
    r.nonfinite = describe_nonfinite(step, local_loss_bad);
    if (train_.on_nonfinite == TrainConfig::OnNonFinite::kAbort) {
      throw NonFiniteStepError(r.nonfinite + "; stopping (train.on_nonfinite is \"abort\"; \"skip\" "
                               "skips such steps' updates)");
    }
    r.skipped = true;
    dp_->skip_update();
  } else {
    dp_->update(r.lr, clip.factor);
  }
  r.step_seconds = monotonic_seconds() - start;
  r.pipeline_seconds = executed.finish_seconds;
  r.busy_seconds = executed.busy_seconds;
  r.events = std::move(executed.events);
  return r;
}

void DistributedTrainer::reschedule(schedule::Schedule schedule) {
  if (schedule.layout != plan_.schedule.layout) {
    throw Error("reschedule: the new schedule's layout (" + std::to_string(schedule.layout.num_ranks()) + " ranks, " +
                std::to_string(schedule.layout.num_microbatches) + " micro-batches) is not the plan's (" +
                std::to_string(plan_.num_ranks()) + " ranks, " + std::to_string(plan_.global_microbatches()) +
                " micro-batches): only the micro-batches' ranks may change");
  }
  plan_.schedule = std::move(schedule);
  // The executor reads the plan and the lowered schedule held here, replaced in place.
  lowered_ = lower_plan(plan_, options_.recv_lookahead);
  executor_->set_program(make_rank_program(plan_, lowered_, rank_, world_.max_tag()));
  eval_executor_.reset();  // rebuilt from the new schedule's forwards on its next use
}

std::string DistributedTrainer::describe_nonfinite(std::int64_t step, bool local_loss_bad) {
  // Per rank: [loss not finite, then per chunk: virtual stage, 1 + first bad tensor (0: none),
  // kind]. Gradients are compared after their reduction, in the part of the stage the rank
  // holds reduced (all of it at level 0, its shard above), so a bad one shows on a holder of its
  // stage; the stage and tensor say where it is.
  std::vector<double> mine = {local_loss_bad ? 1.0 : 0.0};
  for (int c = 0; c < dp_->num_chunks(); ++c) {
    int kind = 0;
    const std::optional<std::size_t> bad = dp_->chunk(c).first_nonfinite(kind);
    mine.push_back(static_cast<double>(c));
    mine.push_back(bad ? static_cast<double>(*bad) + 1 : 0.0);
    mine.push_back(kind);
  }
  // Over the whole job (every rank reached this on the same reduced flags); job rank j is TP rank
  // tp_rank_of(j) of the schedule's rank schedule_rank_of(j).
  const std::vector<std::vector<double>> all = gather_all(world_, mine);
  std::string loss_ranks, grads;
  std::vector<bool> stage_named(static_cast<std::size_t>(plan_.num_vstages()), false);
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& v = all[r];
    if (v.at(0) != 0) loss_ranks += (loss_ranks.empty() ? "" : ", ") + std::to_string(r);
    const auto& stages =
        plan_.schedule.layout.rank_vstages[static_cast<std::size_t>(plan_.schedule_rank_of(static_cast<int>(r)))];
    for (std::size_t i = 1; i + 2 < v.size(); i += 3) {
      const int chunk = static_cast<int>(v[i]);
      const int tensor = static_cast<int>(v[i + 1]) - 1;
      if (tensor < 0) continue;
      const int vstage = stages.at(static_cast<std::size_t>(chunk));
      if (stage_named[static_cast<std::size_t>(vstage)]) continue;
      stage_named[static_cast<std::size_t>(vstage)] = true;
      model::StageSpec spec = plan_.vstage_specs[static_cast<std::size_t>(vstage)];
      spec.tp_rank = plan_.tp_rank_of(static_cast<int>(r));
      const auto names = model::parameter_layout(plan_.model, spec);
      std::string holders;
      for (int h : plan_.holders(vstage)) holders += (holders.empty() ? "" : ", ") + std::to_string(h);
      grads += std::string(grads.empty() ? "" : "; ") + kind_name(static_cast<int>(v[i + 2])) +
               " gradient in " + names.at(static_cast<std::size_t>(tensor)).name + " on stage " +
               std::to_string(vstage) + " (rank" + (plan_.holders(vstage).size() > 1 ? "s " : " ") +
               holders + ", after the gradient reduction)";
    }
  }
  std::string text = "step " + std::to_string(step) + ": ";
  if (!loss_ranks.empty()) {
    const bool several = loss_ranks.find(',') != std::string::npos;
    text += "non-finite loss (NaN or infinite) on rank" + std::string(several ? "s " : " ") + loss_ranks;
    if (!grads.empty()) text += "; ";
  }
  if (!grads.empty()) text += grads;
  if (loss_ranks.empty() && grads.empty()) text += "non-finite loss or gradient norm";
  return text;
}

double DistributedTrainer::evaluate(std::int64_t step, const data::BatchSource& source, int batches) {
  if (source.seq() != plan_.seq || source.microbatch_size() != plan_.microbatch_size ||
      source.microbatches_per_step() != plan_.global_microbatches() || batches < 1) {
    throw Error("evaluation: the source gives " + std::to_string(source.microbatches_per_step()) +
                " micro-batches of " + std::to_string(source.microbatch_size()) + " x " +
                std::to_string(source.seq()) + " tokens (" + std::to_string(batches) +
                " batches); the plan's global batch is " + std::to_string(plan_.global_microbatches()) +
                " of " + std::to_string(plan_.microbatch_size) + " x " + std::to_string(plan_.seq));
  }
  if (!eval_executor_) {
    eval_plan_ = forward_only_plan(plan_);
    eval_lowered_ = lower_plan(eval_plan_, options_.recv_lookahead);
    std::vector<model::StageModel*> chunks;
    for (auto& m : models_) chunks.push_back(m.get());
    eval_executor_ = std::make_unique<PipelineExecutor>(
        eval_plan_, make_rank_program(eval_plan_, eval_lowered_, rank_, world_.max_tag()), world_,
        chunks, *dp_, *buffers_, ExecutorMode::kEvaluate);
  }
  dp_->begin_step(0, false);
  FailureInjection failure;
  if (options_.failure.at(world_.rank(), step, FailureInjection::Kind::kKillInEval)) {  // by MPI rank
    failure = {world_.rank(), step, FailureInjection::Kind::kKill};
  }
  // The mean over the targets that count in all the rounds (data/document_mask.h).
  std::int64_t counted = 0;
  for (int b = 0; b < batches; ++b) {
    counted += data::counted_targets(data::FixedStepSource(source, b), step, plan_.global_microbatches());
  }
  const double scale = 1.0 / static_cast<double>(counted);
  double local = 0;
  for (int b = 0; b < batches; ++b) {
    // Validation round b, run at the training step's number.
    const data::FixedStepSource round(source, b);
    local += eval_executor_->run(step, round, monotonic_seconds(), false, b == 0 ? failure : FailureInjection{},
                                 scale).loss;
  }
  // Over the job, TP rank 0's (every TP rank of a head stage has the whole loss of its units).
  return world_.allreduce(tp_rank_ == 0 ? local : 0.0, comm::ReduceOp::kSum);
}

int DistributedTrainer::optimizer_steps() const {
  return dp_->num_chunks() == 0 ? 0 : dp_->chunk(0).optimizer().steps_taken();
}

void DistributedTrainer::set_optimizer_steps(int steps) {
  for (int c = 0; c < dp_->num_chunks(); ++c) dp_->chunk(c).optimizer().set_steps_taken(steps);
}

std::vector<std::vector<float>> DistributedTrainer::gather_parameters() {
  std::vector<std::vector<float>> full(models_.size());
  std::vector<comm::Request> pending;
  for (int c = 0; c < dp_->num_chunks(); ++c) {
    ShardedChunk& chunk = dp_->chunk(c);
    std::vector<float>& out = full[static_cast<std::size_t>(c)];
    out.resize(chunk.model().parameters().size());
    if (!chunk.master_sharded()) {
      const std::span<const float> p = chunk.model().parameters();
      std::copy(p.begin(), p.end(), out.begin());
      continue;
    }
    // The rank's shard where the optimizer keeps it, then every holder's block in place.
    const std::span<const float> shard = chunk.shard_parameters();
    std::copy(shard.begin(), shard.end(), out.begin() + chunk.shard_begin());
    if (chunk.policy().level > 0) pending.push_back(dp_->group(c)->iallgather(out, chunk.block_counts()));
  }
  comm::wait_all(pending);
  return full;
}

}  // namespace plait::runtime
