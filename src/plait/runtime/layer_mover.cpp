#include "plait/runtime/layer_mover.h"

#include <algorithm>
#include <cstdio>

#include "plait/core/median.h"

namespace plait::runtime {
namespace {

std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : "/") + std::to_string(x);
  return s;
}

double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

}  // namespace

double LinkProbe::bytes_per_second() const {
  const double extra = large_seconds - small_seconds;
  const double bytes = static_cast<double>(large_bytes - small_bytes);
  if (extra > 0) return bytes / extra;
  // Noise made the difference vanish (a loaded host: the small round trip waited longer than the
  // large one): the large message's bytes over the longer of the two one-way times, a bandwidth
  // no higher than either suggests.
  const double t = std::max(large_seconds, small_seconds);
  return t > 0 ? static_cast<double>(large_bytes) / t : 0.0;
}

std::string describe(const LayerMove& m) {
  char figures[320];
  std::snprintf(figures, sizeof figures,
                "%.2f MiB over a link of %.3g MB/s and %.3g ms, and a %.3f s rebuild: cost %.3f s; saves %.2f ms "
                "a step x %lld steps = %.3f s",
                static_cast<double>(m.bytes) / (1 << 20), m.link.bytes_per_second() / 1e6, 1e3 * m.link.latency(),
                m.rebuild_seconds, m.cost_seconds, 1e3 * m.saved_per_step, static_cast<long long>(m.horizon),
                m.gain_seconds);
  char who[96];
  std::snprintf(who, sizeof who, "rank %d %s at %.2fx its history", m.rank, m.flagged ? "flagged" : "cleared",
                m.slowdown);
  std::string line = "move layers: step " + std::to_string(m.step) + ": " + (m.made ? "moved " : "declined ") +
                     std::to_string(m.layers) + " layer" + (m.layers == 1 ? "" : "s") + " from stage " +
                     std::to_string(m.from) + " to stage " + std::to_string(m.to) + " (layers " + joined(m.before) +
                     " -> " + joined(m.after) + "; " + who + "; " + figures;
  if (m.made) {
    char took[96];
    std::snprintf(took, sizeof took, "; took %.3f s, %.3f s of it sending and receiving", m.seconds,
                  m.transfer_seconds);
    line += took;
  }
  line += ")";
  if (!m.why.empty()) line += ": " + m.why;
  return line;
}

LayerMover::LayerMover(const StragglerConfig& config, const PipelinePlan& plan)
    : config_(config), model_(plan.model), planned_(plan.vstage_layers), current_(plan.vstage_layers) {
  recent_.resize(static_cast<std::size_t>(plan.num_ranks()));
  if (!config.enabled || !config.move_layers) {
    unavailable_ = config.enabled ? "stragglers.move_layers is false" : "stragglers.enabled is false";
    return;
  }
  const auto& vstages = plan.schedule.layout.rank_vstages;
  bool in_order = plan.num_vstages() == plan.num_ranks();
  for (std::size_t r = 0; in_order && r < vstages.size(); ++r) {
    in_order = vstages[r].size() == 1 && vstages[r][0] == static_cast<std::int32_t>(r);
  }
  bool activations = false;
  for (int v = 0; v < plan.num_vstages(); ++v) activations = activations || plan.offloads_activations(v);
  if (plan.num_vstages() < 2) {
    unavailable_ = "one pipeline stage: no layers to move";
  } else if (!in_order) {
    unavailable_ = "tier (b) moves layers only when every rank holds one stage, in pipeline order (pp >= 2, dp 1, "
                   "one chunk)";
  } else if (plan.any_tensor_parallel()) {
    unavailable_ = "tier (b) does not move tensor-parallel stages (parallel.tp up to " +
                   std::to_string(plan.max_tensor_parallel()) + ")";
  } else if (plan.sharded() || activations) {
    unavailable_ = "tier (b) moves only unsharded, unoffloaded stages (parallel.shard level 0, no parallel.offload)";
  }
}

double LayerMover::layer_scale(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  if (r >= current_.size() || current_[r] == 0 || current_ == planned_) return 1.0;
  return static_cast<double>(planned_[r]) / current_[r];
}

std::size_t LayerMover::layer_bytes(int layers) const {
  // fp32 master weights and both AdamW moments (the gradients are zero at a step boundary: their
  // buffers are allocated anew, nothing of them travels).
  return static_cast<std::size_t>(layers) * static_cast<std::size_t>(model_.layer_parameters()) * 3 * sizeof(float);
}

std::optional<LayerMove> LayerMover::best_move(int rank, const std::vector<double>& per_step) const {
  const int stages = static_cast<int>(current_.size());
  std::vector<double> per_layer;
  for (int r = 0; r < stages; ++r) per_layer.push_back(per_step[static_cast<std::size_t>(r)] / current_[static_cast<std::size_t>(r)]);
  const double now = max_of(per_step);
  std::optional<LayerMove> best;
  double best_max = now;
  for (int to : {rank - 1, rank + 1}) {
    if (to < 0 || to >= stages) continue;
    for (int n = 1; n < current_[static_cast<std::size_t>(rank)]; ++n) {
      std::vector<double> next = per_step;
      next[static_cast<std::size_t>(rank)] = per_layer[static_cast<std::size_t>(rank)] * (current_[static_cast<std::size_t>(rank)] - n);
      next[static_cast<std::size_t>(to)] = per_layer[static_cast<std::size_t>(to)] * (current_[static_cast<std::size_t>(to)] + n);
      if (max_of(next) < best_max) {
        best_max = max_of(next);
        LayerMove m;
        m.from = rank;
        m.to = to;
        m.layers = n;
        m.before = current_;
        m.after = current_;
        m.after[static_cast<std::size_t>(rank)] -= n;
        m.after[static_cast<std::size_t>(to)] += n;
        m.saved_per_step = now - best_max;
        best = m;
      }
    }
  }
  return best;
}

std::optional<LayerMove> LayerMover::observe(std::int64_t step, const std::vector<RankStepTimes>& ranks,
                                             const std::vector<StragglerChange>& changes, std::int64_t steps_left,
                                             const std::function<LinkProbe(int, int)>& probe) {
  for (std::size_t r = 0; r < recent_.size(); ++r) {
    recent_[r].push_back(ranks.at(r).compute_total());
    if (recent_[r].size() > static_cast<std::size_t>(std::max(1, config_.consecutive))) recent_[r].pop_front();
  }
  if (!unavailable_.empty() || changes.empty()) return std::nullopt;
  const StragglerChange& why = changes.front();  // one move at a time: the first change decides
  std::vector<double> per_step;
  for (const auto& q : recent_) per_step.push_back(median(std::vector<double>(q.begin(), q.end())));
  std::optional<LayerMove> m;
  if (why.flagged) {
    if (current_ != planned_) return std::nullopt;  // a move is in force already
    m = best_move(why.rank, per_step);
    if (!m) return std::nullopt;  // no move shortens the step in the measured speeds
  } else {
    if (current_ == planned_) return std::nullopt;
    // The plan's partition back: one adjacent pair differs (one move in force).
    m = LayerMove{};
    m->before = current_;
    m->after = planned_;
    for (std::size_t v = 0; v < current_.size(); ++v) {
      if (current_[v] > planned_[v]) {
        m->from = static_cast<int>(v);
        m->layers = current_[v] - planned_[v];
      } else if (current_[v] < planned_[v]) {
        m->to = static_cast<int>(v);
      }
    }
    std::vector<double> next = per_step;
    for (std::size_t v = 0; v < current_.size(); ++v) next[v] = per_step[v] / current_[v] * planned_[v];
    m->saved_per_step = max_of(per_step) - max_of(next);
  }
  m->step = step;
  m->rank = why.rank;
  m->flagged = why.flagged;
  m->slowdown = why.vs_history;
  m->bytes = layer_bytes(m->layers);
  m->horizon = config_.move_horizon > 0 ? std::min<std::int64_t>(config_.move_horizon, steps_left) : steps_left;
  m->gain_seconds = std::max(0.0, m->saved_per_step) * static_cast<double>(m->horizon);
  m->link = probe(m->from, m->to);
  const double bandwidth = m->link.bytes_per_second();
  m->rebuild_seconds = rebuild_seconds_;
  m->cost_seconds =
      m->link.latency() + (bandwidth > 0 ? static_cast<double>(m->bytes) / bandwidth : 0.0) + m->rebuild_seconds;
  m->made = m->gain_seconds > m->cost_seconds;
  if (!m->made) {
    m->why = m->saved_per_step <= 0 ? "it would not shorten the step"
                                    : "moving costs more than it saves over the horizon";
  }
  return m;
}

}  // namespace plait::runtime
