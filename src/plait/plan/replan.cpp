#include "plait/plan/replan.h"

#include "plait/plan/plan_file.h"

namespace plait::plan {

Replan replan_job(const nlohmann::json& config, const ClusterSpec& cluster, const JobShape& job) {
  const PlanningProblem problem =
      make_problem(cluster, job.model, static_cast<std::int64_t>(job.microbatch_size) * job.microbatches, job.seq);
  PlannerOptions options;
  options.microbatch_sizes = {job.microbatch_size};
  options.tensor_parallel = {1};
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
