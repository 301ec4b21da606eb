#pragma once
// What a resume may change, and what it may not (docs/checkpoints.md, "What a resume may
// change"). A checkpoint's manifest records the whole config its run used; `plait train
// --resume` compares this run's with it:
//
//   model (every field of the section)   never: an InputError naming the field in this run's
//                                         config (a checkpoint loads only into its model)
//   optimizer: train.weight_decay, beta1, beta2, eps, grad_clip
//   learning-rate schedule: train.lr, min_lr, warmup_steps, steps
//   global batch: train.seq, microbatch_size, the micro-batches of the whole step
//   seed: train.seed (against the RNG state the checkpoint recorded)
//                                         a recipe change: refused unless allowed
//                                         (--allow-recipe-change), then each printed
//   everything else                       free: layout (parallel section), segments,
//                                         validation, checkpoint and watchdog settings, and
//                                         data paths (the data itself is compared by its
//                                         checksums: training_data.h)
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/runtime/parallel_config.h"

namespace plait::runtime {

struct RecipeChange {
  std::string field;  // "train.lr"
  std::string was;    // the checkpoint's value, as JSON ("0.003")
  std::string now;    // this run's
  std::string what;   // "the optimizer", "the learning-rate schedule", "the batch", "the seed"
};

// "train.lr 0.003 -> 0.001".
std::string describe(const RecipeChange& change);

// Throws InputError (file job.run.source, field "model.<key>") when the model differs; returns
// the recipe changes in the order of the table above. `saved_config` and `rng_state` are the
// manifest's (`manifest` names it in messages).
std::vector<RecipeChange> recipe_changes(const nlohmann::json& saved_config, const nlohmann::json& rng_state,
                                         const JobConfig& job, const std::string& manifest);

// recipe_changes(); with changes and !allow, one InputError listing them all. Returns the
// changes (to print when allowed).
std::vector<RecipeChange> check_resume_recipe(const nlohmann::json& saved_config, const nlohmann::json& rng_state,
                                              const JobConfig& job, const std::string& manifest, bool allow);

}  // namespace plait::runtime
