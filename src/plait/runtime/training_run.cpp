#include "plait/runtime/training_run.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "plait/checkpoint/checkpoint_manifest.h"
#include "plait/checkpoint/checkpoint_store.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"
#include "plait/checkpoint/checkpoint_scan.h"
#include "plait/core/splitmix64.h"
#include "plait/model/tensor_shard_copy.h"
#include "plait/runtime/hf_import.h"
#include "plait/runtime/layer_transfer.h"
#include "plait/runtime/pipeline_sampler.h"
#include "plait/runtime/predicted_memory.h"
#include "plait/runtime/resume_recipe.h"
#include "plait/runtime/training_checkpoint.h"
#include "plait/runtime/training_resume.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

std::string manifest_path(const std::string& dir) { return (fs::path(dir) / "manifest.json").string(); }

// init.from: every chunk's parameters from the Hugging Face model (each rank reads the tensors
// of its own chunks); the AdamW state stays zero, as at step 0 of any run.
std::string initialise_from_hf(DistributedTrainer& trainer, const RunConfig& run) {
  // The model first (config.json alone), then the weights.
  check_same_model(run.model, read_hf_model(run.init->hf_dir), run.init->hf_dir, run.source);
  const HfModel hf(run.init->hf_dir);
  std::vector<float> values, whole;
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    for (const model::NamedTensor& t : trainer.chunk(c).tensors()) {
      note_progress("init: reading " + t.name + " from " + hf.dir());
      values.resize(t.numel);
      if (t.shard.dim < 0) {
        hf.read(t, values);
      } else {
        // A tensor-parallel rank's part of the whole tensor (model/tensor_shard_copy.h).
        model::NamedTensor all = t;
        all.shape = t.full_shape;
        all.numel = t.full_numel();
        whole.resize(all.numel);
        hf.read(all, whole);
        model::copy_shard_out(whole, t, values);
      }
      load_chunk_parameter(trainer, c, t, values);
    }
  }
  return "the Hugging Face model in " + hf.dir() + " (" + hf.describe() + ")";
}

}  // namespace

nlohmann::json TrainingRun::config_json(const JobConfig& job) {
  // train.segments stays what was asked for (a count stays a count, so that "parallel.split"
  // still applies when it is read back).
  nlohmann::json j = to_json(job.run);
  j["parallel"] = to_json(job.parallel);
  return j;
}

TrainingRun::TrainingRun(const JobConfig& job, const PipelinePlan& plan, comm::Communicator& world,
                         MemoryTracker& tracker, TrainingRunOptions options)
    : job_(job),
      global_(job.global_train()),
      world_(world),
      tracker_(tracker),
      options_(std::move(options)),
      cold_(world.size(), job.run.stragglers.value_or(StragglerConfig{}).window),
      stragglers_(job.run.stragglers.value_or(StragglerConfig{}), world.size()),
      rebalancer_(job.run.stragglers.value_or(StragglerConfig{}), plan),
      mover_(job.run.stragglers.value_or(StragglerConfig{}), plan) {
  const std::optional<CheckpointConfig>& ckpt = job.run.checkpoint;
  std::error_code ec;
  if (ckpt && fs::exists(ckpt->dir, ec) && !fs::is_directory(ckpt->dir, ec)) {
    throw InputError(job.run.source, "checkpoint.dir", ckpt->dir + " is a file; checkpoints need a directory");
  }
  if (ckpt) lock_checkpoint_dir();
  std::unique_ptr<checkpoint::CheckpointReader> reader = open_resume_point();
  std::optional<DataResume> data_resume;
  if (reader) {
    data_resume = DataResume{reader->manifest().data_position, reader->manifest().rng_state,
                             manifest_path(reader->dir()), options_.allow_recipe_change};
  }
  std::vector<std::string> newer;  // complete checkpoints in checkpoint.dir past the start
  if (ckpt) {
    for (const std::string& dir : checkpoint::list_checkpoints(ckpt->dir)) {
      const std::int64_t step = checkpoint::checkpoint_dir_step(dir);
      if (!reader || step > start_) newer.push_back(dir);
    }
    // A fresh run's saves would replace them: refuse. A resume from an older step (named, or
    // because the newer ones do not verify) keeps them aside, untouched, below.
    if (!newer.empty() && !reader) {
      throw InputError(job.run.source, "checkpoint.dir",
                       ckpt->dir + " already holds checkpoints (up to " + fs::path(newer.back()).filename().string() +
                           ") that a fresh run would replace; continue the newest with --resume, or "
                           "give another directory");
    }
  }
  stop_ = global_.steps;
  if (options_.stop_at > 0) {
    if (options_.stop_at <= start_ || options_.stop_at > global_.steps) {
      throw Error("--stop-at " + std::to_string(options_.stop_at) + ": expected a step in [" +
                  std::to_string(start_ + 1) + ", " + std::to_string(global_.steps) + "] (after the start step " +
                  std::to_string(start_) + ", at most train.steps " + std::to_string(global_.steps) + ")");
    }
    stop_ = options_.stop_at;
  }
  data_ = std::make_unique<TrainingData>(job.run, global_, data_resume);
  for (const std::string& note : data_->resume_notes()) notes_.push_back(note);
  // Every rank has chosen and checked before rank 0 changes anything in the checkpoint root.
  world.barrier();
  if (ckpt && world.rank() == 0) prepare_checkpoint_root(newer);
  const double building = monotonic_seconds();
  trainer_ = std::make_unique<DistributedTrainer>(plan, global_, world, tracker, options_.trainer);
  // What a layer move's rebuild will cost, as the slowest rank built its trainer (layer_mover.h).
  mover_.set_rebuild_seconds(world.allreduce(monotonic_seconds() - building, comm::ReduceOp::kMax));
  if (reader) {
    restore_training_checkpoint(*trainer_, *reader);
  } else if (job.run.init) {
    initialised_from_ = initialise_from_hf(*trainer_, job.run);
  }
  next_ = start_;
  final_validation_ = stop_ == global_.steps && data_->validation() != nullptr;
  finished_ = next_ == stop_ && !final_validation_;
  if (ckpt && ckpt->save_initial && !reader) initial_checkpoint_ = save(0);
}

void TrainingRun::lock_checkpoint_dir() {
  // Only rank 0 locks: flock excludes open files, so the ranks of one job on one machine would
  // exclude each other; rank 0 creates every staging directory and commits every save, and the
  // other ranks write only into the staging directories it created under the lock.
  std::string failure;
  if (world_.rank() == 0) {
    try {
      const Directory root = checkpoint::create_checkpoint_root(job_.run.checkpoint->dir);
      lock_ = std::make_unique<DirectoryLock>(root, "a checkpoint directory");
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  if (world_.allreduce(failure.empty() ? 0.0 : 1.0, comm::ReduceOp::kSum) == 0) return;
  if (world_.rank() == 0) throw Error(failure);
  throw Error("checkpoint.dir " + job_.run.checkpoint->dir + ": rank 0 could not lock it (rank 0 says why)");
}

std::unique_ptr<checkpoint::CheckpointReader> TrainingRun::open_resume_point() {
  if (!options_.resume) return nullptr;
  std::string path = *options_.resume;
  if (path.empty()) {
    if (!job_.run.checkpoint) {
      throw InputError(job_.run.source, "checkpoint.dir",
                       "missing: --resume without a path resumes from the config's checkpoint "
                       "directory");
    }
    path = job_.run.checkpoint->dir;
  }
  ResumePoint point = find_resume_point(path);
  for (const auto& s : point.skipped) notes_.push_back("skipped " + s.dir + ", which does not verify: " + s.why);
  if (!point.latest_note.empty()) notes_.push_back(point.latest_note);
  if (!point.reader) return nullptr;
  const std::string file = manifest_path(point.reader->dir());
  const checkpoint::CheckpointManifest& m = point.reader->manifest();
  for (const RecipeChange& c : check_resume_recipe(m.config, m.rng_state, job_, file, options_.allow_recipe_change)) {
    notes_.push_back("recipe change (--allow-recipe-change): " + describe(c) + ", " + c.what);
  }
  start_ = point.reader->manifest().step;
  if (start_ > global_.steps) {
    throw InputError(file, "step",
                     "the checkpoint is at step " + std::to_string(start_) + ", past train.steps " +
                         std::to_string(global_.steps) + " of " + job_.run.source +
                         " (raise train.steps or --steps to train further)");
  }
  resumed_from_ = point.reader->dir();
  return std::move(point.reader);
}

void TrainingRun::prepare_checkpoint_root(const std::vector<std::string>& newer) {
  const CheckpointConfig& ckpt = *job_.run.checkpoint;
  checkpoint::create_checkpoint_root(ckpt.dir);  // an unusable directory fails now, not at a save
  // Under the lock no live run's staging is here (unless flock is not supported: then keep all).
  if (lock_ && lock_->warning().empty()) {
    for (const std::string& n : checkpoint::remove_abandoned_staging(ckpt.dir)) {
      notes_.push_back("removed " + n + ", left by a run that ended during a save");
    }
  }
  if (!options_.resume) return;
  for (const std::string& dir : newer) {
    const std::string aside = checkpoint::set_checkpoint_aside(dir);
    notes_.push_back("kept " + dir + " aside as " + fs::path(aside).filename().string() +
                     " (newer than the step resumed from; renamed, nothing deleted)");
  }
  // `latest` names the newest complete checkpoint left: the one resumed from when it is here.
  const std::vector<std::string> left = checkpoint::list_checkpoints(ckpt.dir);
  std::optional<std::string> latest;
  std::string problem;
  try {
    latest = checkpoint::latest_checkpoint(ckpt.dir);
  } catch (const Error& e) {
    problem = e.what();
  }
  const std::optional<std::string> want = left.empty() ? std::nullopt : std::optional(left.back());
  const auto name = [](const std::optional<std::string>& d) { return d ? fs::path(*d).filename().string() : ""; };
  if (name(latest) != name(want) || !problem.empty()) {
    checkpoint::point_latest(ckpt.dir, want);
    if (latest || !problem.empty()) {
      notes_.push_back(want ? "repaired latest: it now names " + name(want) : "removed latest: no complete checkpoint is left to name");
    }
  }
}

TrainingRun::~TrainingRun() = default;

std::string TrainingRun::save(std::int64_t step) {
  TrainingState state;
  state.step = step;
  std::error_code ec;
  state.working_directory = fs::current_path(ec).string();
  state.config = config_json(job_);
  state.data_position = data_->state(step);
  state.rng_state = data_->rng_state();
  return save_training_checkpoint(*trainer_, world_, *job_.run.checkpoint, state, options_.trainer.failure);
}

TrainingStep TrainingRun::next() {
  if (finished_) throw Error("training run: next() after the last step");
  TrainingStep rec;
  rec.step = next_;
  const data::BatchSource* validation = data_->validation();
  if (next_ == stop_) {
    // Only the final validation after the last step is left.
    rec.val_loss = trainer_->evaluate(next_, *validation, global_.eval_batches);
    finished_ = true;
    return rec;
  }
  if (data_->validation_due(next_)) {
    rec.val_loss = trainer_->evaluate(next_, *validation, global_.eval_batches);
  }
  rec.result = trainer_->step(next_, data_->train());
  ++next_;
  rec.stop_requests = rec.result->stop_requests;
  // A rank's speed in its plan's layers (a rank that gave layers away runs shorter units), warm
  // or warm-equivalent (a rank left one micro-batch per chunk runs only cold actions).
  rec.seconds_per_unit = cold_.seconds_per_unit(rec.result->ranks);
  for (std::size_t r = 0; r < rec.seconds_per_unit.size(); ++r) {
    rec.seconds_per_unit[r] *= mover_.layer_scale(trainer_->plan().schedule_rank_of(static_cast<int>(r)));
  }
  rec.stragglers = stragglers_.observe(rec.step, rec.seconds_per_unit);
  const double deciding = monotonic_seconds();
  if (std::optional<ShareRebalancer::Decision> d = rebalancer_.observe(rec.step, rec.result->ranks, rec.stragglers, stragglers_)) {
    trainer_->reschedule(std::move(d->schedule));
    rec.rebalances = std::move(d->changes);
    rec.rebalance_seconds = monotonic_seconds() - deciding;
  }
  rec.rebalance_failure = rebalancer_.take_failure();
  move_layers_if_it_pays(rec);
  rec.stopped = rec.stop_requests > 0 && next_ < stop_;
  const std::optional<CheckpointConfig>& ckpt = job_.run.checkpoint;
  if (ckpt && (rec.stopped || next_ == stop_ || (ckpt->every > 0 && next_ % ckpt->every == 0))) {
    const double start = monotonic_seconds();
    rec.checkpoint = save(next_);
    rec.save_seconds = monotonic_seconds() - start;
  }
  if (global_.sample_every > 0 && next_ % global_.sample_every == 0) {
    // From the data's document separator; the draws' seed depends on the run's and the step.
    rec.sample_prompt = {job_.run.data.tokenizer == "gpt2" ? kGpt2VocabSize - 1 : '\n'};
    SamplingOptions sampling;
    sampling.seed = splitmix64(global_.seed) ^ static_cast<std::uint64_t>(next_);
    rec.sample = sample_through_pipeline(*trainer_, world_, tracker_, rec.sample_prompt, global_.sample_tokens, sampling);
  }
  stopped_ = rec.stopped;
  finished_ = stopped_ || (next_ == stop_ && !final_validation_);
  return rec;
}

void TrainingRun::move_layers_if_it_pays(TrainingStep& rec) {
  const auto probe = [this](int from, int to) { return probe_link(*trainer_, from, to); };
  std::optional<LayerMove> m = mover_.observe(rec.step, rec.result->ranks, rec.stragglers, stop_ - next_, probe);
  if (!m) return;
  if (m->made) {
    // The partition and the schedule regenerated as the config's plan is built (the same checks;
    // a partition they refuse, e.g. recompute counts beyond a stage's new layers, is declined on
    // every rank alike).
    JobConfig moved = job_;
    moved.parallel.layers = m->after;
    std::optional<PipelinePlan> next;
    try {
      next = build_pipeline_plan(moved, world_.size());
    } catch (const Error& e) {
      m->made = false;
      m->why = std::string("the new partition is refused: ") + e.what();
    }
    // The receiving stage holds more layers' weights, moments and activations: not past a
    // device's capacity (predicted_memory.h; the same decision on every rank).
    if (next) {
      if (std::string why = capacity_exceeded(*next, trainer_->plan()); !why.empty()) {
        m->made = false;
        m->why = "the new partition would not fit: " + why;
        next.reset();
      }
    }
    if (next) {
      auto [trainer, times] = move_layers(std::move(trainer_), *next, global_, world_, tracker_, options_.trainer);
      trainer_ = std::move(trainer);
      m->seconds = times.seconds;
      m->transfer_seconds = times.transfer_seconds;
      mover_.applied(*m);
      mover_.set_rebuild_seconds(world_.allreduce(times.seconds - times.transfer_seconds, comm::ReduceOp::kMax));
    }
  }
  rec.moves.push_back(std::move(*m));
}

}  // namespace plait::runtime
