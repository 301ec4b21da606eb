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
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/plan/plan.h"
#include "plait/plan/planner.h"

namespace plait::plan {

struct JobShape {
  spec::NamedModel model;
  std::int64_t seq = 0;
  int microbatch_size = 0;
  int microbatches = 0;  // in the global batch
  // The tensor-parallel degrees the job ran with (its plan's "tp"; empty or {1}: none). The
  // re-plan may use them besides the planner's default for the cluster
  // (default_tensor_parallel_degrees): a job planned with plait plan --tp 2 on an emulated
  // cluster, where TP is opt-in, keeps that option.
  std::vector<int> tensor_parallel;
};

struct Replan {
  nlohmann::json config;  // the plan file to run (plan_file_json over the job's config)
  std::string summary;    // PlanChoice::summary of the chosen plan
  int ranks = 0;
  double predicted_step_seconds = 0;
};

// The tensor-parallel degrees a re-plan of `job` on `cluster` tries, ascending: the planner's
// default for the cluster (default_tensor_parallel_degrees) and the job's own.
std::vector<int> replan_tensor_parallel(const ClusterSpec& cluster, const JobShape& job);

// Plans `job` on `cluster` (at replan_tensor_parallel's degrees) and writes its plan file over
// `config`.
// Throws plait::Error("cannot plan: ...") when no layout fits the cluster.
Replan replan_job(const nlohmann::json& config, const ClusterSpec& cluster, const JobShape& job);

}  // namespace plait::plan
