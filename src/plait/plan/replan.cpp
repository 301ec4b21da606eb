#include "plait/plan/replan.h"

#include <algorithm>

#include "plait/plan/plan_file.h"
#include "plait/plan/tensor_parallel_options.h"

namespace plait::plan {

std::vector<int> replan_tensor_parallel(const ClusterSpec& cluster, const JobShape& job) {
  std::vector<int> degrees = default_tensor_parallel_degrees(cluster);
  degrees.insert(degrees.end(), job.tensor_parallel.begin(), job.tensor_parallel.end());
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  return degrees;
}

Replan replan_job(const nlohmann::json& config, const ClusterSpec& cluster, const JobShape& job) {
  const PlanningProblem problem =
      make_problem(cluster, job.model, static_cast<std::int64_t>(job.microbatch_size) * job.microbatches, job.seq);
  PlannerOptions options;
  options.microbatch_sizes = {job.microbatch_size};
  options.tensor_parallel = replan_tensor_parallel(problem.cluster, job);
  options.top = 1;
  const PlannerResult result = plan_cluster(problem, options);
  const Plan& best = result.plans.front();
  Replan out;
  out.config = plan_file_json(problem, best, &config);
  out.summary = best.choice.summary(problem.cluster);
  out.ranks = best.choice.devices_used();
  out.predicted_step_seconds = best.prediction.step_seconds;
  return out;
}

}  // namespace plait::plan
