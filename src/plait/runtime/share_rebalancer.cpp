#include "plait/runtime/share_rebalancer.h"

#include <algorithm>
#include <cstdio>

#include "plait/core/error.h"
#include "plait/core/median.h"
#include "plait/runtime/predicted_memory.h"
#include "plait/schedule/microbatch_shares.h"
#include "plait/schedule/validator.h"

namespace plait::runtime {
namespace {

std::string joined(const std::vector<int>& v, const char* sep) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : sep) + std::to_string(x);
  return s;
}

// The group's time for a step's micro-batches: its slowest rank's count x seconds per micro-batch.
double group_seconds(const std::vector<int>& counts, const std::vector<double>& seconds) {
  double t = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) t = std::max(t, counts[i] * seconds[i]);
  return t;
}

}  // namespace

std::string describe(const ShareChange& c) { return "re-balance: step " + std::to_string(c.step) + ": " + describe_shares(c); }

std::string describe_shares(const ShareChange& c) {
  std::string stages;
  for (std::int32_t v : c.vstages) stages += (stages.empty() ? "" : ", ") + std::to_string(v);
  char why[120];
  std::snprintf(why, sizeof why, "rank %d %s at %.2fx its history", c.rank, c.flagged ? "flagged" : "cleared",
                c.slowdown);
  return "stage" + std::string(c.vstages.size() > 1 ? "s " : " ") + stages +
         " data-parallel shares " + joined(c.before, "/") + " -> " + joined(c.after, "/") + " (ranks " +
         joined(c.ranks, ", ") + "; " + why + (c.planned ? ", the plan's shares back" : "") + ")";
}

ShareRebalancer::ShareRebalancer(const StragglerConfig& config, const PipelinePlan& plan)
    : config_(config), plan_(plan) {
  recent_.resize(static_cast<std::size_t>(plan.num_ranks()));
  if (!config.enabled || !config.rebalance) {
    unavailable_ = config.enabled ? "stragglers.rebalance is false" : "stragglers.enabled is false";
    return;
  }
  family_ = schedule::find_schedule_family(plan.schedule_name);
  if (family_ == nullptr) {
    unavailable_ = "the schedule \"" + plan.schedule_name +
                   "\" names no schedule family to regenerate it with (parallel.schedule_name: one of " +
                   schedule::schedule_family_names() + ")";
    return;
  }
  try {
    planned_pipeline_ = schedule::heterogeneous_pipeline_of(plan.schedule, *family_);
    if (std::string why = schedule::heterogeneous_unsupported(family_->name, planned_pipeline_); !why.empty()) {
      throw Error(why);
    }
  } catch (const Error& e) {
    unavailable_ = family_->name + " cannot regenerate this layout with other shares: " + e.what();
    return;
  }
  current_ = planned_pipeline_;
  schedule_ = plan_.schedule;
  position_of_rank_.assign(static_cast<std::size_t>(plan.num_ranks()), 0);
  bool peers = false;
  for (int g = 0; g < current_.num_groups(); ++g) {
    peers = peers || current_.stage_ranks[static_cast<std::size_t>(g)].size() > 1;
    for (int r : current_.stage_ranks[static_cast<std::size_t>(g)]) position_of_rank_[static_cast<std::size_t>(r)] = g;
  }
  if (!peers) unavailable_ = "no stage has data-parallel peers (tier b, moving layers, is not built)";
}

double ShareRebalancer::seconds_per_unit(int rank, std::size_t kind) const {
  std::vector<double> v;
  for (const RankStepTimes& t : recent_[static_cast<std::size_t>(rank)]) {
    if (kind == kUnitKinds) {
      if (t.unit_total() > 0) v.push_back(t.seconds_per_unit());
    } else if (t.units[kind] > 0) {
      v.push_back(t.compute_seconds[kind] / t.units[kind]);
    }
  }
  return median(std::move(v));
}

std::optional<ShareChange> ShareRebalancer::rebalance(int position, std::int64_t step, const StragglerChange& why) {
  const std::vector<int>& ranks = current_.stage_ranks[static_cast<std::size_t>(position)];
  std::vector<int>& counts = current_.stage_counts[static_cast<std::size_t>(position)];
  const std::vector<int>& planned = planned_pipeline_.stage_counts[static_cast<std::size_t>(position)];
  std::vector<double> seconds, speed;
  for (int r : ranks) {
    seconds.push_back(seconds_per_unit(r, kUnitKinds));
    if (seconds.back() <= 0) return std::nullopt;  // nothing measured yet
    speed.push_back(1 / seconds.back());
  }
  std::vector<int> next;
  if (!why.flagged) {
    next = planned;  // the group's last straggler is back: the plan's shares
  } else {
    next = schedule::microbatch_shares(current_.num_microbatches, speed);
    // Only when it pays in the measured speeds: the group's step gets shorter.
    if (next.empty() || group_seconds(next, seconds) >= group_seconds(counts, seconds)) return std::nullopt;
  }
  if (next == counts) return std::nullopt;
  ShareChange c;
  c.step = step;
  c.position = position;
  c.ranks = ranks;
  c.before = counts;
  c.after = next;
  c.rank = plan_.schedule_rank_of(why.rank);
  c.flagged = why.flagged;
  c.slowdown = why.vs_history;
  c.planned = next == planned;
  for (int k = 0; k < current_.chunks; ++k) {
    c.vstages.push_back(schedule::placed_vstage(family_->placement, current_.num_groups(), position, k));
  }
  counts = next;
  return c;
}

std::string ShareRebalancer::over_capacity(const schedule::Schedule& schedule, const schedule::Schedule& in_force) const {
  PipelinePlan next = plan_, now = plan_;
  next.schedule = schedule;
  now.schedule = in_force;
  return capacity_exceeded(next, now);
}

std::optional<ShareRebalancer::Decision> ShareRebalancer::observe(std::int64_t step, const std::vector<RankStepTimes>& ranks,
                                                                  const std::vector<StragglerChange>& changes,
                                                                  const StragglerDetector& detector) {
  // A schedule rank's times are its slowest TP rank's (the group computes in lock-step).
  for (std::size_t r = 0; r < recent_.size(); ++r) {
    const int rank = static_cast<int>(r);
    RankStepTimes slowest = ranks.at(static_cast<std::size_t>(plan_.job_rank(rank, 0)));
    for (int i = 1; i < plan_.tensor_parallel(rank); ++i) {
      const RankStepTimes& other = ranks.at(static_cast<std::size_t>(plan_.job_rank(rank, i)));
      if (other.seconds_per_unit() > slowest.seconds_per_unit()) slowest = other;
    }
    recent_[r].push_back(slowest);
    if (recent_[r].size() > static_cast<std::size_t>(std::max(1, config_.consecutive))) recent_[r].pop_front();
  }
  if (!unavailable_.empty() || changes.empty()) return std::nullopt;
  Decision d;
  std::vector<bool> done(static_cast<std::size_t>(current_.num_groups()), false);
  for (const StragglerChange& why : changes) {
    const int position = position_of_rank_.at(static_cast<std::size_t>(plan_.schedule_rank_of(why.rank)));
    if (done[static_cast<std::size_t>(position)]) continue;
    if (current_.stage_ranks[static_cast<std::size_t>(position)].size() < 2) continue;  // tier (b)'s case
    StragglerChange reason = why;
    if (!why.flagged) {
      // A clear restores the plan's shares only when no rank of the group is flagged any more;
      // otherwise the remaining stragglers' speeds decide.
      for (int r : current_.stage_ranks[static_cast<std::size_t>(position)]) {
        for (int i = 0; i < plan_.tensor_parallel(r); ++i) {
          reason.flagged = reason.flagged || detector.flagged(plan_.job_rank(r, i));
        }
      }
    }
    if (std::optional<ShareChange> c = rebalance(position, step, reason)) {
      c->flagged = why.flagged;
      d.changes.push_back(std::move(*c));
      done[static_cast<std::size_t>(position)] = true;
    }
  }
  if (d.changes.empty()) return std::nullopt;
  const schedule::Schedule in_force = schedule_;
  if (current_.stage_counts == planned_pipeline_.stage_counts) {
    d.schedule = plan_.schedule;
  } else {
    try {
      schedule::HeterogeneousCosts costs;
      // Measured seconds per unit by kind (B holds fused BW); segments and stages are not told
      // apart: every rank ran its own mix of them in the measured steps.
      costs.unit_seconds = [this](int rank, schedule::ActionKind kind, std::int32_t, std::int32_t) {
        const std::size_t k = kind == schedule::ActionKind::F ? 0 : kind == schedule::ActionKind::W ? 2 : 1;
        return seconds_per_unit(rank, k);
      };
      d.schedule = schedule::heterogeneous_schedule(*family_, current_, costs);
      if (std::optional<schedule::Violation> v = schedule::validate(d.schedule)) {
        throw Error("the regenerated schedule is invalid: " + schedule::summary(d.schedule, *v));
      }
    } catch (const Error& e) {
      // The same failure on every rank (the same inputs): keep the shares in force, and stop
      // re-balancing rather than the job.
      for (const ShareChange& c : d.changes) current_.stage_counts[static_cast<std::size_t>(c.position)] = c.before;
      unavailable_ = "re-balancing stopped at step " + std::to_string(step) + ": " + e.what();
      failure_ = unavailable_;
      return std::nullopt;
    }
  }
  if (std::string why = over_capacity(d.schedule, in_force); !why.empty()) {
    for (const ShareChange& c : d.changes) current_.stage_counts[static_cast<std::size_t>(c.position)] = c.before;
    failure_ = "re-balance after step " + std::to_string(step) + " declined (" + describe_shares(d.changes.front()) +
               "): " + why;
    return std::nullopt;
  }
  schedule_ = d.schedule;
  return d;
}

std::string ShareRebalancer::take_failure() {
  std::string f = std::move(failure_);
  failure_.clear();
  return f;
}

}  // namespace plait::runtime
