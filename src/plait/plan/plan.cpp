#include "plait/plan/plan.h"

#include <algorithm>
#include <cstdio>

#include "plait/core/error.h"

namespace plait::plan {

spec::SequencePartition plan_partition(const PlanningProblem& problem, const PlanChoice& choice) {
  spec::SegmentRequest request;
  request.count = choice.segments;
  request.split = choice.split;
  if (choice.split == spec::SplitMethod::flops && choice.segments > 1) request.multiple = choice.split_multiple;
  return spec::cut_sequence(problem.model.model, problem.seq, request);
}

spec::SequencePartition planned_memory_partition(const PlanningProblem& problem, int microbatch_size,
                                                 const spec::SequencePartition& nominal, std::int64_t multiple) {
  if (!problem.documents || nominal.count() < 2 || nominal.split != spec::SplitMethod::flops) return nominal;
  return problem.documents->load(microbatch_size, nominal, multiple).worst;
}

std::int64_t document_cut_multiple(const PlanChoice& choice) {
  std::int64_t m = std::max<std::int64_t>(choice.split_multiple, 1);
  for (const StageGroup& g : choice.groups) m = std::max<std::int64_t>(m, g.tp);
  return m;
}

std::vector<int> PlanningProblem::tp_members(int lead, int t) const { return plan::tp_members(cluster, lead, t); }

std::vector<int> tp_members(const ClusterSpec& cluster, int lead, int t) {
  std::vector<int> out;
  if (lead < 0 || lead + t > cluster.num_devices()) return out;
  for (int d = lead; d < lead + t; ++d) {
    if (cluster.devices[d].machine != cluster.devices[lead].machine || cluster.devices[d].type != cluster.devices[lead].type) {
      return {};
    }
    out.push_back(d);
  }
  return out;
}

sim::LinkProfile PlanningProblem::tp_ring_link(const std::vector<int>& members) const {
  sim::LinkProfile ring{0.0, 0.0};
  const std::size_t n = members.size();
  for (std::size_t i = 0; i < n && n > 1; ++i) {
    const sim::LinkProfile& l = cluster.link(members[i], members[(i + 1) % n]);
    ring.bandwidth_bytes_per_second =
        i == 0 ? l.bandwidth_bytes_per_second : std::min(ring.bandwidth_bytes_per_second, l.bandwidth_bytes_per_second);
    ring.latency_seconds = std::max(ring.latency_seconds, l.latency_seconds);
  }
  return ring;
}

int PlanningProblem::kind(int lead, int t) const {
  if (t == 1) return cluster.devices[lead].type;
  const std::vector<int> members = tp_members(lead, t);
  if (members.empty()) {
    throw Error("tensor parallelism: " + cluster.device_name(lead) + " and the " + std::to_string(t - 1) +
                " devices after it are not " + std::to_string(t) + " devices of one type in one machine");
  }
  const sim::LinkProfile link = tp_ring_link(members);
  const int type = cluster.devices[lead].type;
  for (std::size_t k = 0; k < tp_kinds.size(); ++k) {
    const RankKind& r = tp_kinds[k];
    if (r.type == type && r.degree == t && r.link.latency_seconds == link.latency_seconds &&
        r.link.bandwidth_bytes_per_second == link.bandwidth_bytes_per_second) {
      return static_cast<int>(cluster.types.size() + k);
    }
  }
  throw Error("tensor parallelism: no rank kind of " + std::to_string(t) + " " + cluster.type_of(lead).name +
              " devices from " + cluster.device_name(lead) + " (t must divide the machine's devices of that type)");
}

void add_tensor_parallel_kinds(PlanningProblem& problem) {
  const ClusterSpec& c = problem.cluster;
  problem.tp_kinds.clear();
  for (const Machine& m : c.machines) {
    for (int type = 0; type < static_cast<int>(c.types.size()); ++type) {
      std::vector<int> of_type;
      for (int d : m.devices) {
        if (c.devices[d].type == type) of_type.push_back(d);
      }
      for (int t : kTensorParallelDegrees) {
        if (t == 1 || of_type.empty() || of_type.size() % static_cast<std::size_t>(t) != 0) continue;
        for (int lead : of_type) {
          const std::vector<int> members = problem.tp_members(lead, t);
          if (members.empty()) continue;
          const sim::LinkProfile link = problem.tp_ring_link(members);
          const bool known = std::any_of(problem.tp_kinds.begin(), problem.tp_kinds.end(), [&](const PlanningProblem::RankKind& k) {
            return k.type == type && k.degree == t && k.link.latency_seconds == link.latency_seconds &&
                   k.link.bandwidth_bytes_per_second == link.bandwidth_bytes_per_second;
          });
          if (!known) problem.tp_kinds.push_back({type, t, link});
        }
      }
    }
  }
}

sim::LinkProfile PlanningProblem::kind_link(int kind) const {
  return kind < static_cast<int>(cluster.types.size()) ? sim::LinkProfile{} : tp_kinds[kind - cluster.types.size()].link;
}

std::vector<int> PlanChoice::vstage_tensor_parallel() const {
  std::vector<int> out(vstage_layers.size(), 1);
  for (int g = 0; g < num_groups(); ++g) {
    for (std::int32_t v : group_vstages(g)) out[static_cast<std::size_t>(v)] = groups[g].tp;
  }
  return out;
}

std::vector<int> PlanChoice::rank_tensor_parallel() const {
  std::vector<std::pair<int, int>> ranks;  // (lead device, t)
  for (const StageGroup& g : groups) {
    for (int d : g.devices) ranks.push_back({d, g.tp});
  }
  std::sort(ranks.begin(), ranks.end());
  std::vector<int> out;
  for (const auto& r : ranks) out.push_back(r.second);
  return out;
}

int PlanChoice::devices_used() const {
  int n = 0;
  for (const StageGroup& g : groups) n += static_cast<int>(g.devices.size()) * g.tp;
  return n;
}

std::vector<int> PlanChoice::rank_devices() const {
  std::vector<int> out;
  for (const StageGroup& g : groups) out.insert(out.end(), g.devices.begin(), g.devices.end());
  std::sort(out.begin(), out.end());
  return out;
}

const schedule::ScheduleFamily& PlanChoice::policy() const { return schedule::schedule_family(family); }

std::vector<std::int32_t> PlanChoice::group_vstages(int group) const {
  if (!held.empty()) return held[group];
  const schedule::StagePlacement placement = policy().placement;
  std::vector<std::int32_t> out;
  for (int c = 0; c < chunks; ++c) out.push_back(schedule::placed_vstage(placement, num_groups(), group, c));
  return out;
}

spec::ShardPolicy default_shard(Precision precision, int group_size) {
  return {precision == Precision::bf16 && group_size > 1 ? 1 : 0, false};
}

spec::ShardPolicy PlanChoice::shard_of(int group, Precision precision) const {
  if (!shard.empty()) return shard[static_cast<std::size_t>(group)];
  return default_shard(precision, static_cast<int>(groups[static_cast<std::size_t>(group)].devices.size()));
}

double PlanChoice::shard_fraction(const ClusterSpec& cluster, int group, std::size_t index, Precision precision) const {
  const StageGroup& g = groups[static_cast<std::size_t>(group)];
  if (shard_of(group, precision).level == 0) return 1.0;
  if (!memory_shares) return 1.0 / static_cast<double>(g.devices.size());
  double total = 0;
  for (int d : g.devices) total += cluster.type_of(d).memory_bytes;
  return cluster.type_of(g.devices[index]).memory_bytes / total;
}

std::string bytes_text(double bytes) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  char buf[32];
  if (bytes >= 4 * kGiB) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024));
  }
  return buf;
}

std::string PlanChoice::summary(const ClusterSpec& cluster) const {
  std::string out = family;
  char buf[96];
  if (chunks > 1) {
    std::snprintf(buf, sizeof buf, " v=%d", chunks);
    out += buf;
  }
  if (segments > 1) {
    std::snprintf(buf, sizeof buf, " k=%d (%s)", segments, std::string(spec::split_method_name(split)).c_str());
    out += buf;
  }
  std::snprintf(buf, sizeof buf, " b=%d M=%d, %d stage%s [", microbatch_size, num_microbatches, num_groups(),
                num_groups() == 1 ? "" : "s");
  out += buf;
  for (int g = 0; g < num_groups(); ++g) {
    if (g) out += " | ";
    // Devices of a group by type: "8 a100" or "4 a10g + 2 t4"; "8 a100 tp4" for two TP groups of 4.
    std::vector<std::pair<int, int>> counts;  // (type, count)
    for (int d : groups[g].devices) {
      const int t = cluster.devices[d].type;
      auto it = std::find_if(counts.begin(), counts.end(), [t](const auto& c) { return c.first == t; });
      if (it == counts.end()) {
        counts.push_back({t, groups[g].tp});
      } else {
        it->second += groups[g].tp;
      }
    }
    for (std::size_t i = 0; i < counts.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%d %s", i ? " + " : "", counts[i].second,
                    cluster.types[counts[i].first].name.c_str());
      out += buf;
    }
    if (groups[g].tp > 1) out += " tp" + std::to_string(groups[g].tp);
  }
  out += "], layers ";
  for (std::size_t i = 0; i < vstage_layers.size(); ++i) out += (i ? "," : "") + std::to_string(vstage_layers[i]);
  if (recomputes()) {
    out += ", recompute ";
    for (std::size_t i = 0; i < recompute_layers.size(); ++i) out += (i ? "," : "") + std::to_string(recompute_layers[i]);
  }
  if (!shard.empty()) {
    out += ", shard ";
    for (std::size_t g = 0; g < shard.size(); ++g) {
      out += (g ? "," : "") + std::to_string(shard[g].level) + (shard[g].offload ? "+offload" : "");
    }
    if (memory_shares) out += " (memory shares)";
  }
  if (!offload_activations.empty()) {
    out += ", offload activations ";
    for (std::size_t g = 0; g < offload_activations.size(); ++g) out += (g ? "," : "") + std::string(offload_activations[g] ? "1" : "0");
  }
  return out;
}

}  // namespace plait::plan
