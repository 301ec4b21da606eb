#include "plait/runtime/training_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plait/checkpoint/checkpoint_manifest.h"
#include "plait/checkpoint/checkpoint_store.h"
#include "plait/core/error.h"
#include "plait/runtime/training_checkpoint.h"

namespace plait::runtime {
namespace fs = std::filesystem;
namespace {

std::string manifest_path(const std::string& dir) { return (fs::path(dir) / "manifest.json").string(); }

// A checkpoint loads only into the model it was written for; say which field differs.
void check_same_model(const nlohmann::json& saved_config, const JobConfig& job, const std::string& file) {
  const nlohmann::json ours = to_json(job.run).at("model");
  if (!saved_config.is_object() || !saved_config.contains("model") || !saved_config["model"].is_object()) {
    throw InputError(file, "config.model", "missing; expected the model section of the run that wrote it");
  }
  const nlohmann::json& theirs = saved_config["model"];
  for (const auto& [key, value] : ours.items()) {
    if (!theirs.contains(key) || theirs[key] != value) {
      throw InputError(file, "config.model." + key,
                       "the checkpoint's model has " + (theirs.contains(key) ? theirs[key].dump() : "none") +
                           ", this run's config (" + job.run.source + ") has " + value.dump() +
                           "; a checkpoint loads only into the model it was written for");
    }
  }
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
    : job_(job), global_(job.global_train()), world_(world), options_(std::move(options)) {
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  std::optional<DataResume> data_resume;
  if (options_.resume) {
    std::string path = *options_.resume;
    if (path.empty()) {
      if (!job.run.checkpoint) {
        throw InputError(job.run.source, "checkpoint.dir",
                         "missing: --resume without a path resumes from the config's checkpoint "
                         "directory");
      }
      path = job.run.checkpoint->dir;
    }
    if (const std::optional<std::string> dir = find_checkpoint(path)) {
      reader = std::make_unique<checkpoint::CheckpointReader>(*dir);
      const std::string file = manifest_path(*dir);
      check_same_model(reader->manifest().config, job, file);
      start_ = reader->manifest().step;
      if (start_ > global_.steps) {
        throw InputError(file, "step",
                         "the checkpoint is at step " + std::to_string(start_) + ", past train.steps " +
                             std::to_string(global_.steps) + " of " + job.run.source +
                             " (raise train.steps or --steps to train further)");
      }
      data_resume = DataResume{reader->manifest().data_position, reader->manifest().rng_state, file};
      resumed_from_ = *dir;
    }
  }
  if (job.run.checkpoint) {
    // Saves replace a step's directory; never let a run overwrite checkpoints newer than where it
    // starts (a fresh run into a used directory, or a resume from an older step).
    const std::string& dir = job.run.checkpoint->dir;
    const std::vector<std::string> existing = checkpoint::list_checkpoints(dir);
    if (!existing.empty()) {
      const std::string newest = fs::path(existing.back()).filename().string();
      if (std::stoll(newest.substr(5)) > start_) {  // list_checkpoints: "step_<digits>", by step
        throw InputError(job.run.source, "checkpoint.dir",
                         dir + " already holds checkpoints up to " + newest + ", past this run's start (" +
                             (resumed_from_.empty() ? std::string("a fresh run at step 0")
                                                    : "step " + std::to_string(start_) + " of " + resumed_from_) +
                             "); continue the newest with --resume, or give another directory");
      }
    }
  }
  stop_ = global_.steps;
  if (options_.stop_at > 0) {
    if (options_.stop_at <= start_) {
      throw Error("--stop-at " + std::to_string(options_.stop_at) + ": expected a step after the start step " +
                  std::to_string(start_));
    }
    stop_ = std::min<std::int64_t>(options_.stop_at, global_.steps);
  }
  data_ = std::make_unique<TrainingData>(job.run, global_, data_resume);
  trainer_ = std::make_unique<DistributedTrainer>(plan, global_, world, tracker, options_.trainer);
  if (reader) restore_training_checkpoint(*trainer_, *reader);
  next_ = start_;
  final_validation_ = stop_ == global_.steps && data_->validation() != nullptr;
  finished_ = next_ == stop_ && !final_validation_;
}

TrainingRun::~TrainingRun() = default;

std::string TrainingRun::save(std::int64_t step) {
  TrainingState state;
  state.step = step;
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
  const std::optional<CheckpointConfig>& ckpt = job_.run.checkpoint;
  if (ckpt && (next_ == stop_ || (ckpt->every > 0 && next_ % ckpt->every == 0))) {
    rec.checkpoint = save(next_);
  }
  finished_ = next_ == stop_ && !final_validation_;
  return rec;
}

JobConfig job_config_of_checkpoint(const std::string& checkpoint_dir) {
  const std::string file = manifest_path(checkpoint_dir);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "(file)", "cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  const checkpoint::CheckpointManifest m = checkpoint::parse_manifest(text.str(), file);
  JobConfig job = parse_job_config(m.config, file + " (config)");
  return job;
}

}  // namespace plait::runtime
