#pragma once
// What `plait plan` prints: the problem, the search, the chosen plan (predicted step time,
// throughput, bubble, per-device memory and utilisation by stage) and the runner-ups.
#include <string>

#include "plait/plan/planner.h"

namespace plait::plan {

// The cluster, model, batch, precision and device profiles.
std::string format_problem(const PlanningProblem& problem);

// With packed documents: the worst step planned for, its cost against equal work, the worst cut.
std::string format_documents(const DocumentPrediction& documents);

// One plan in detail: per stage and device type, micro-batches, busy share and memory.
std::string format_plan(const PlanningProblem& problem, const Plan& plan, const std::string& title);

// The search figures, the chosen plan and the runner-ups; verbose adds every simulated layout
// with its analytic estimate.
std::string format_result(const PlanningProblem& problem, const PlannerResult& result, bool verbose = false);

}  // namespace plait::plan
