#include "plait/runtime/data_parallel_model.h"

#include <algorithm>
#include <set>
#include <vector>

#include "plait/core/monotonic_clock.h"
#include "plait/core/reserved_buffer.h"
#include "plait/core/thread_copy_engine.h"
#include "plait/kernels/adamw.h"
#include "plait/model/parameter_layout.h"
#include "plait/spec/precision_policy.h"

namespace plait::runtime {

sim::DataParallelModel data_parallel_model(const PipelinePlan& plan, const UpdateCosts& costs) {
  sim::DataParallelModel dp;
  for (int v = 0; v < plan.num_vstages(); ++v) {
    sim::StageSync s;
    s.policy = plan.vstage_shard.empty() ? spec::ShardPolicy{} : plan.vstage_shard[static_cast<std::size_t>(v)];
    s.holders = plan.holders(v);
    const auto elements = static_cast<std::int64_t>(
        model::layout_size(model::parameter_layout(plan.model, plan.vstage_specs[static_cast<std::size_t>(v)])));
    s.elements = static_cast<double>(elements);
    s.gradient_bytes_per_element = static_cast<double>(spec::dp_gradient_bytes(plan.precision, plan.grad_reduce));
    s.weight_bytes_per_element = static_cast<double>(spec::dp_weight_bytes(plan.precision));
    if (s.policy.level > 0) {
      const std::vector<std::int64_t> bounds = plan.shard_bounds(v, elements);
      for (std::size_t h = 0; h + 1 < bounds.size(); ++h) s.shard.push_back(static_cast<double>(bounds[h + 1] - bounds[h]));
    }
    dp.stages.push_back(std::move(s));
  }
  if (plan.tied_table_split()) {
    std::set<int> holders;
    for (int v : {0, plan.num_vstages() - 1}) {
      for (int r : plan.holders(v)) holders.insert(r);
    }
    dp.tied_holders.assign(holders.begin(), holders.end());
    dp.tied_bytes = static_cast<double>(spec::dp_gradient_bytes(plan.precision, plan.grad_reduce)) * plan.model.vocab *
                    plan.model.hidden;
  }
  dp.optimizer_seconds = [costs](int, double elements, bool host) {
    return elements * (host ? costs.host_seconds_per_element : costs.device_seconds_per_element);
  };
  dp.copy_seconds = [costs](int, double bytes) {
    return costs.copy_bytes_per_second > 0 ? bytes / costs.copy_bytes_per_second : 0.0;
  };
  if (costs.commit_bytes_per_second > 0) {
    dp.commit_seconds = [costs](int, double bytes) { return bytes / costs.commit_bytes_per_second; };
  }
  if (costs.all_reduce_seconds_per_byte > 0) {
    dp.collective_seconds = [costs](const std::vector<int>& holders, double bytes, sim::Collective kind) {
      if (holders.size() < 2) return 0.0;
      switch (kind) {
        case sim::Collective::all_reduce: return bytes * costs.all_reduce_seconds_per_byte;
        case sim::Collective::reduce_scatter: return bytes * costs.reduce_scatter_seconds_per_byte;
        case sim::Collective::all_gather: return bytes * costs.all_gather_seconds_per_byte;
      }
      return 0.0;
    };
  }
  return dp;
}

UpdateCosts measure_update_costs(comm::Communicator& group, std::size_t elements, int repeats) {
  std::vector<float> p(elements, 0.5f), g(elements, 1e-3f), m(elements), v(elements), copy(elements);
  const kernels::AdamWHyper hyper{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f};
  MemoryTracker scratch;
  ThreadCopyEngine engine;
  const auto median = [](std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::vector<double> adam, copies, commits, reduce, scatter, gather;
  const int n = group.size();
  std::vector<std::size_t> counts(static_cast<std::size_t>(n), elements / static_cast<std::size_t>(n));
  counts.back() += elements % static_cast<std::size_t>(n);
  for (int i = 0; i < repeats; ++i) {
    double t0 = monotonic_seconds();
    kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), elements, hyper);
    adam.push_back(monotonic_seconds() - t0);
    t0 = monotonic_seconds();
    engine.wait(engine.submit(copy.data(), p.data(), elements * sizeof(float)));
    copies.push_back(monotonic_seconds() - t0);
    {
      ReservedBuffer<float> fresh(scratch, MemoryCategory::kGradients, elements, false);
      t0 = monotonic_seconds();
      fresh.commit();
      for (std::size_t e = 0; e < elements; e += 1024) fresh[e] = 1.0f;  // first touch of every page
      commits.push_back(monotonic_seconds() - t0);
    }
    group.barrier();
    t0 = monotonic_seconds();
    group.allreduce(std::span<float>(g), comm::ReduceOp::kSum);
    reduce.push_back(monotonic_seconds() - t0);
    group.barrier();
    t0 = monotonic_seconds();
    group.ireduce_scatter(std::span<float>(g), counts, comm::ReduceOp::kSum).wait();
    scatter.push_back(monotonic_seconds() - t0);
    group.barrier();
    t0 = monotonic_seconds();
    group.iallgather(std::span<float>(g), counts).wait();
    gather.push_back(monotonic_seconds() - t0);
  }
  const double bytes = static_cast<double>(elements * sizeof(float));
  UpdateCosts c;
  c.device_seconds_per_element = c.host_seconds_per_element = median(adam) / static_cast<double>(elements);
  c.copy_bytes_per_second = bytes / median(copies);
  c.commit_bytes_per_second = bytes / median(commits);
  c.all_reduce_seconds_per_byte = median(reduce) / bytes;
  c.reduce_scatter_seconds_per_byte = median(scatter) / bytes;
  c.all_gather_seconds_per_byte = median(gather) / bytes;
  return c;
}

}  // namespace plait::runtime
