#include "plait/sim/data_parallel_timing.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/chunk_uses.h"
#include "plait/schedule/lazy_gathers.h"

namespace plait::sim {

double ring_collective_seconds(const CostModel& cost, const std::vector<int>& holders, double bytes, Collective kind) {
  const auto n = static_cast<int>(holders.size());
  if (n < 2) return 0;
  const auto piece = static_cast<std::int64_t>(bytes / n);
  double step = 0;
  for (int i = 0; i < n; ++i) {
    step = std::max(step, cost.transfer_seconds(holders[static_cast<std::size_t>(i)],
                                                holders[static_cast<std::size_t>((i + 1) % n)], piece));
  }
  return (kind == Collective::all_reduce ? 2 : 1) * (n - 1) * step;
}

int CollectiveGates::add_gate(const std::vector<int>& holders, double seconds) {
  holders_.push_back(holders);
  seconds_.push_back(seconds);
  latest_start_.push_back(0);
  completion_.push_back(-1);
  started_.push_back(0);
  waiters_.emplace_back();
  return static_cast<int>(holders_.size()) - 1;
}

CollectiveGates::CollectiveGates(const schedule::Schedule& schedule, const schedule::LoweredSchedule& lowered,
                                 const DataParallelModel& model, const CostModel& cost)
    : model_(model), cost_(cost) {
  const schedule::Layout& layout = schedule.layout;
  const int ranks = schedule.num_ranks();
  if (static_cast<int>(model.stages.size()) != layout.num_vstages) {
    throw Error("data-parallel timing: " + std::to_string(model.stages.size()) + " stages, the schedule has " +
                std::to_string(layout.num_vstages));
  }
  before_.resize(static_cast<std::size_t>(ranks));
  after_.resize(static_cast<std::size_t>(ranks));
  wait_.resize(static_cast<std::size_t>(ranks));
  rank_reductions_.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const std::size_t ops = lowered.programs[static_cast<std::size_t>(r)].size();
    before_[r].resize(ops + 1);
    after_[r].resize(ops + 1);
    wait_[r].assign(ops + 1, -1);
  }
  std::vector<bool> gathered;
  for (const StageSync& s : model.stages) gathered.push_back(s.policy.shards_parameters());
  const bool lazy = schedule::lazy_gathers_deadlock_free(schedule, lowered, gathered);
  // Per rank: the op positions of each action's compute and of the start of its group (its
  // receives, else the compute), as the executor starts gathers before waiting for inputs.
  std::vector<std::vector<std::int32_t>> compute_at(static_cast<std::size_t>(ranks)), group_at(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const auto& ops = lowered.programs[static_cast<std::size_t>(r)];
    compute_at[r].resize(schedule.ranks[r].size());
    group_at[r].resize(schedule.ranks[r].size());
    std::int32_t start = -1;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == schedule::OpKind::recv && start < 0) start = static_cast<std::int32_t>(i);
      if (ops[i].kind == schedule::OpKind::compute) {
        compute_at[r][static_cast<std::size_t>(ops[i].index)] = static_cast<std::int32_t>(i);
        group_at[r][static_cast<std::size_t>(ops[i].index)] = start >= 0 ? start : static_cast<std::int32_t>(i);
        start = -1;
      }
    }
  }
  const auto collective = [&](const std::vector<int>& holders, double bytes, Collective kind) {
    return model.collective_seconds ? model.collective_seconds(holders, bytes, kind)
                                    : ring_collective_seconds(cost, holders, bytes, kind);
  };
  const auto commit = [&](const std::vector<int>& holders, double bytes) {
    return model.commit_seconds && !holders.empty() ? model.commit_seconds(holders.front(), bytes) : 0.0;
  };
  reduction_of_stage_.assign(model.stages.size(), -1);
  std::vector<double> tied_post(static_cast<std::size_t>(ranks), -1);
  for (std::size_t v = 0; v < model.stages.size(); ++v) {
    const StageSync& s = model.stages[v];
    const double bytes = s.elements * s.weight_bytes_per_element;
    const double gradient_bytes = s.elements * s.gradient_bytes_per_element;
    const int gather = s.policy.shards_parameters()
                           ? add_gate(s.holders, commit(s.holders, bytes) + collective(s.holders, bytes, Collective::all_gather))
                           : -1;
    const int reduce = s.holders.size() > 1
                           ? add_gate(s.holders, collective(s.holders, gradient_bytes,
                                                            s.policy.level == 0 ? Collective::all_reduce
                                                                                : Collective::reduce_scatter))
                           : -1;
    reduction_of_stage_[v] = reduce;
    for (int r : s.holders) {
      const auto& stages = layout.rank_vstages[static_cast<std::size_t>(r)];
      const auto c = static_cast<std::size_t>(std::find(stages.begin(), stages.end(), static_cast<std::int32_t>(v)) - stages.begin());
      const schedule::ChunkUses u = schedule::chunk_uses(schedule.ranks[r], layout.num_chunks(r))[c];
      if (u.first < 0) continue;
      if (gather >= 0) {
        before_[r][static_cast<std::size_t>(group_at[r][static_cast<std::size_t>(lazy ? u.prefetch() : 0)])].push_back(gather);
        wait_[r][static_cast<std::size_t>(compute_at[r][static_cast<std::size_t>(u.first)])] = gather;
      }
      if (reduce >= 0 && u.last_weight >= 0) {
        after_[r][static_cast<std::size_t>(compute_at[r][static_cast<std::size_t>(u.last_weight)])].push_back(reduce);
        rank_reductions_[r].push_back(reduce);
      }
    }
  }
  if (model.tied_holders.size() > 1) {
    tied_gate_ = add_gate(model.tied_holders, collective(model.tied_holders, model.tied_bytes, Collective::all_reduce));
    const int V = layout.num_vstages;
    for (int r : model.tied_holders) {
      // After the rank's last W of the first or last stage, whichever comes later.
      std::int32_t last = -1;
      const auto& stages = layout.rank_vstages[static_cast<std::size_t>(r)];
      const auto uses = schedule::chunk_uses(schedule.ranks[r], layout.num_chunks(r));
      for (std::size_t c = 0; c < stages.size(); ++c) {
        if (stages[c] == 0 || stages[c] == V - 1) last = std::max(last, uses[c].last_weight);
      }
      if (last >= 0) after_[r][static_cast<std::size_t>(compute_at[r][static_cast<std::size_t>(last)])].push_back(tied_gate_);
      rank_reductions_[r].push_back(tied_gate_);
    }
  }
}

std::vector<int> CollectiveGates::start_before(int rank, std::int32_t op, double now) {
  std::vector<int> woken;
  for (int g : before_[rank][static_cast<std::size_t>(op)]) {
    const auto i = static_cast<std::size_t>(g);
    latest_start_[i] = std::max(latest_start_[i], now);
    if (++started_[i] == static_cast<int>(holders_[i].size())) {
      completion_[i] = latest_start_[i] + seconds_[i];
      woken.insert(woken.end(), waiters_[i].begin(), waiters_[i].end());
      waiters_[i].clear();
    }
  }
  before_[rank][static_cast<std::size_t>(op)].clear();  // started once, even if the rank waits here
  return woken;
}

void CollectiveGates::start_after(int rank, std::int32_t op, double now) {
  for (int g : after_[rank][static_cast<std::size_t>(op)]) {
    const auto i = static_cast<std::size_t>(g);
    latest_start_[i] = std::max(latest_start_[i], now);
    if (++started_[i] == static_cast<int>(holders_[i].size())) completion_[i] = latest_start_[i] + seconds_[i];
  }
}

int CollectiveGates::wait_before(int rank, std::int32_t op) const { return wait_[rank][static_cast<std::size_t>(op)]; }

double CollectiveGates::step_end(const std::vector<double>& finish, std::vector<double>& rank_end) const {
  const int ranks = static_cast<int>(finish.size());
  // Every rank's reductions, then the step's scalar all-reduce: a barrier.
  double ready = 0;
  for (int r = 0; r < ranks; ++r) {
    double t = finish[static_cast<std::size_t>(r)];
    for (int g : rank_reductions_[static_cast<std::size_t>(r)]) t = std::max(t, completion_[static_cast<std::size_t>(g)]);
    ready = std::max(ready, t);
  }
  std::vector<double> update(static_cast<std::size_t>(ranks), ready);
  for (std::size_t v = 0; v < model_.stages.size(); ++v) {
    const StageSync& s = model_.stages[v];
    for (std::size_t h = 0; h < s.holders.size(); ++h) {
      const int r = s.holders[h];
      const double shard = s.shard.empty() ? s.elements : s.shard[h];
      double t = model_.optimizer_seconds ? model_.optimizer_seconds(r, shard, s.policy.offload) : 0;
      // Levels 2-3 commit the whole gradient buffer afresh each step (on the W's critical path;
      // counted here).
      if (s.policy.shards_gradients() && model_.commit_seconds) t += model_.commit_seconds(r, s.elements * 4);
      if (s.policy.offload && model_.copy_seconds) {
        t += model_.copy_seconds(r, shard * 4);                                       // gradients to the host
        if (!s.policy.shards_parameters()) t += model_.copy_seconds(r, shard * 4);  // the fp32 master back
      }
      update[static_cast<std::size_t>(r)] += t;
    }
  }
  rank_end = update;
  for (const StageSync& s : model_.stages) {
    if (s.policy.level < 1 || s.policy.level > 2) continue;
    double latest = 0;
    for (int r : s.holders) latest = std::max(latest, update[static_cast<std::size_t>(r)]);
    const double bytes = s.elements * s.weight_bytes_per_element;
    const double done = latest + (model_.collective_seconds ? model_.collective_seconds(s.holders, bytes, Collective::all_gather)
                                                            : ring_collective_seconds(cost_, s.holders, bytes, Collective::all_gather));
    for (int r : s.holders) rank_end[static_cast<std::size_t>(r)] = std::max(rank_end[static_cast<std::size_t>(r)], done);
  }
  double end = 0;
  for (double t : rank_end) end = std::max(end, t);
  return end;
}

}  // namespace plait::sim
