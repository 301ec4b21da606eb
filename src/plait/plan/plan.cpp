#include "plait/plan/plan.h"

#include <algorithm>
#include <cstdio>

namespace plait::plan {

spec::SequencePartition plan_partition(const PlanningProblem& problem, const PlanChoice& choice) {
  spec::SegmentRequest request;
  request.count = choice.segments;
  request.split = choice.split;
  return spec::cut_sequence(problem.model.model, problem.seq, request);
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
    // Devices of a group by type: "8 a100" or "4 a10g + 2 t4".
    std::vector<std::pair<int, int>> counts;  // (type, count)
    for (int d : groups[g].devices) {
      const int t = cluster.devices[d].type;
      auto it = std::find_if(counts.begin(), counts.end(), [t](const auto& c) { return c.first == t; });
      if (it == counts.end()) {
        counts.push_back({t, 1});
      } else {
        ++it->second;
      }
    }
    for (std::size_t i = 0; i < counts.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%d %s", i ? " + " : "", counts[i].second,
                    cluster.types[counts[i].first].name.c_str());
      out += buf;
    }
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
  return out;
}

}  // namespace plait::plan
