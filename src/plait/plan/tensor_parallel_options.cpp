#include "plait/plan/tensor_parallel_options.h"

#include <algorithm>

#include "plait/core/error.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::plan {

std::vector<int> default_tensor_parallel_degrees(const ClusterSpec& cluster) {
  if (cluster.emulated) return {1};
  return {std::begin(kTensorParallelDegrees), std::end(kTensorParallelDegrees)};
}

std::vector<TpOption> tp_options(const PlanningProblem& problem, const std::vector<int>& group,
                                 const std::vector<int>& allowed) {
  const ClusterSpec& c = problem.cluster;
  std::vector<int> devices(group);
  std::sort(devices.begin(), devices.end());
  std::vector<TpOption> out;
  TpOption one;
  for (int d : devices) {
    one.leads.push_back(d);
    one.kinds.push_back(c.devices[d].type);
  }
  out.push_back(std::move(one));
  for (int t : allowed) {
    if (t <= 1) continue;
    try {
      spec::check_tensor_parallel(problem.model.model, t);
    } catch (const Error&) {
      continue;
    }
    TpOption o;
    o.degree = t;
    bool ok = true;
    // Runs of consecutive devices of one machine and type; each splits into TP groups of t.
    for (std::size_t i = 0; i < devices.size() && ok;) {
      const int lead = devices[i];
      const std::vector<int> members = problem.tp_members(lead, t);
      ok = !members.empty() && i + t <= devices.size() &&
           std::equal(members.begin(), members.end(), devices.begin() + static_cast<std::ptrdiff_t>(i));
      if (ok) {
        const Machine& m = c.machines[static_cast<std::size_t>(c.devices[lead].machine)];
        const auto of_type = std::count_if(m.devices.begin(), m.devices.end(),
                                           [&](int d) { return c.devices[d].type == c.devices[lead].type; });
        ok = of_type % t == 0;
      }
      if (ok) {
        try {
          o.kinds.push_back(problem.kind(lead, t));
          o.leads.push_back(lead);
        } catch (const Error&) {
          ok = false;
        }
      }
      i += static_cast<std::size_t>(t);
    }
    if (ok) out.push_back(std::move(o));
  }
  return out;
}

}  // namespace plait::plan
