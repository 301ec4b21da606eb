#pragma once
// Re-planning a running job for the devices that remain (plait launch, docs/runtime.md "Lost
// ranks: plait launch"): the same model, sequence length and batch on another cluster, written
// as a plan file that resumes the job's checkpoints. What a resume must not change (the
// checkpoint's recipe, runtime/resume_recipe.h) stays: the planner is held to the job's
// micro-batch size, so the global batch B = b x M keeps both its micro-batch size b and its count
// M; the train fields (steps, lr, warm-up: the learning-rate schedule) and every other section
// (data, checkpoint, ...) are the job's config's. The layout, schedule family, segments,
// recomputation and sharding are chosen anew.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "plait/plan/plan.h"
#include "plait/plan/planner.h"

namespace plait::plan {

struct JobShape {
  spec::NamedModel model;
  std::int64_t seq = 0;
  int microbatch_size = 0;
  int microbatches = 0;  // in the global batch
};

struct Replan {
  nlohmann::json config;  // the plan file to run (plan_file_json over the job's config)
  std::string summary;    // PlanChoice::summary of the chosen plan
  int ranks = 0;
  double predicted_step_seconds = 0;
};

// Plans `job` on `cluster` (tensor parallelism off: the re-plan keeps one device per rank, as an
// emulated CPU cluster plans anyway) and writes its plan file over `config`.
// Throws plait::Error("cannot plan: ...") when no layout fits the cluster.
Replan replan_job(const nlohmann::json& config, const ClusterSpec& cluster, const JobShape& job);

}  // namespace plait::plan
