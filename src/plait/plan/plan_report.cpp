#include "plait/plan/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "plait/plan/memory_policy.h"

namespace plait::plan {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return std::string(buf) + "\n";
}

std::string seconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  }
  return buf;
}

// "n0:0-7" style lists of device names, collapsing consecutive devices of one machine.
std::string device_list(const ClusterSpec& cluster, const std::vector<int>& devices) {
  std::string out;
  std::size_t i = 0;
  while (i < devices.size()) {
    std::size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1 &&
           cluster.devices[devices[j + 1]].machine == cluster.devices[devices[i]].machine) {
      ++j;
    }
    if (!out.empty()) out += ",";
    out += cluster.device_name(devices[i]);
    if (j > i) out += "-" + std::to_string(cluster.devices[devices[j]].local);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string format_problem(const PlanningProblem& problem) {
  const ClusterSpec& c = problem.cluster;
  std::map<std::string, int> counts;
  for (int d = 0; d < c.num_devices(); ++d) ++counts[c.type_of(d).name];
  std::string types;
  for (const auto& [name, n] : counts) types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::string out;
  out += line("cluster    %s: %d devices (%s) on %zu machine%s", c.name.c_str(), c.num_devices(), types.c_str(),
              c.machines.size(), c.machines.size() == 1 ? "" : "s");
  out += line("model      %s: %s", problem.model.name.c_str(), spec::describe(problem.model.model).c_str());
  out += line("batch      %lld sequences x %lld tokens = %.0f tokens per step", static_cast<long long>(problem.global_batch),
              static_cast<long long>(problem.seq), problem.tokens_per_step());
  out += "memory     " + MemoryPolicy{c.precision, {}, c.emulated, c.grad_reduce}.describe() + "\n";
  if (problem.documents) {
    const DocumentPlanning& d = problem.documents->planning();
    out += line("documents  packed (data.packing \"documents\"), lengths from %s, %s; plans are made for the worst "
                "micro-batch of %d steps drawn (docs/planner.md, \"Packed documents\")",
                d.distribution.text().c_str(),
                d.balance_window > 0 ? ("balanced (wlb, window " + std::to_string(d.balance_window) + ")").c_str()
                                     : "plain order",
                d.steps);
  }
  // Device types (their links come from the cluster, not from the profile).
  for (std::size_t t = 0; t < c.types.size(); ++t) {
    const sim::DeviceProfile& p = problem.type_profiles[t];
    std::string speed;
    if (!p.measured && !p.efficiency && p.sustained_flops == 0) {
      out += "device     " + c.types[t].name + ": not used by this plan\n";
      continue;
    }
    if (p.measured) {
      speed = "per-layer latencies of " + p.measured->model + " (" + p.measured->chosen_because + ") at seq " +
              std::to_string(p.measured->seq) + ", " + p.measured->dtype;
    } else {
      speed = p.describe_compute();
    }
    out += "device     " + c.types[t].name + ": " + speed + ", " + bytes_text(c.types[t].memory_bytes) +
           " (source: " + p.source + ")\n";
  }
  return out;
}

std::string format_documents(const DocumentPrediction& d) {
  auto cut = [](const std::vector<std::int64_t>& lengths) {
    std::string out;
    for (std::int64_t len : lengths) out += (out.empty() ? "" : "+") + std::to_string(len);
    return out;
  };
  std::string out;
  out += line("  documents %s, %s, %d steps drawn: planned for the worst step (#%d): pipeline %s, %+.1f%% over the "
              "same work spread equally (%s); mean step %s; full causal rows %s",
              d.distribution.c_str(),
              d.balance_window > 0 ? ("balanced (wlb, window " + std::to_string(d.balance_window) + ")").c_str()
                                   : "plain order",
              d.steps, d.worst_step, seconds(d.worst_seconds).c_str(), 100.0 * (d.worst_seconds / d.equal_seconds - 1.0),
              seconds(d.equal_seconds).c_str(), seconds(d.mean_seconds).c_str(), seconds(d.nominal_seconds).c_str());
  out += line("            its micro-batches' max/mean sum(doc^2) %.3f", d.max_over_mean);
  if (d.cuts) {
    out += line("            segments cut per micro-batch from its documents; memory for the worst cut %s (nominal %s): "
                "stage messages up to %s (nominal %s)",
                cut(d.worst_cut).c_str(), cut(d.nominal_cut).c_str(), bytes_text(d.message_bytes).c_str(),
                bytes_text(d.nominal_message_bytes).c_str());
  } else {
    out += "            segments as planned for every micro-batch (no per-micro-batch cut): memory as without documents\n";
  }
  return out;
}

std::string format_plan(const PlanningProblem& problem, const Plan& plan, const std::string& title) {
  const ClusterSpec& c = problem.cluster;
  const PlanChoice& ch = plan.choice;
  const PlanPrediction& p = plan.prediction;
  std::string out = title + ": " + ch.summary(c) + "\n";
  out += line("  step %s (pipeline %s, longest stage gradient sync %s), %.0f tokens/s, bubble %.1f%%%s",
              seconds(p.step_seconds).c_str(), seconds(p.pipeline_seconds).c_str(), seconds(p.sync_seconds).c_str(),
              p.tokens_per_second, 100 * p.bubble_fraction, p.simulated ? "" : " (estimate)");
  if (ch.segments > 1) {
    const auto part = plan_partition(problem, ch);
    std::string lengths;
    for (std::int64_t len : part.lengths) lengths += (lengths.empty() ? "" : " ") + std::to_string(len);
    out += "  segments " + lengths + "\n";
  }
  if (p.documents) out += format_documents(*p.documents);
  out += "  stage  layers  devices                         micro-batches  busy (util)          memory peak / capacity\n";
  // Rows: one per (stage, device type, micro-batch count).
  for (int g = 0; g < ch.num_groups(); ++g) {
    std::string layers;
    for (std::int32_t s : ch.group_vstages(g)) layers += (layers.empty() ? "" : "+") + std::to_string(ch.vstage_layers[s]);
    std::map<std::pair<int, int>, std::vector<const DevicePrediction*>> rows;
    for (const DevicePrediction& d : p.devices) {
      if (d.group == g) rows[{c.devices[d.device].type, d.microbatches}].push_back(&d);
    }
    bool first = true;
    for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
      const auto& ds = it->second;
      std::vector<int> ids;
      double busy_lo = 1e300, busy_hi = 0, mem = 0, cap = 0;
      const int t = ch.groups[g].tp;
      for (const DevicePrediction* d : ds) {
        for (int m = 0; m < t; ++m) ids.push_back(d->device + m);  // the rank's TP group
        busy_lo = std::min(busy_lo, d->busy_seconds);
        busy_hi = std::max(busy_hi, d->busy_seconds);
        if (d->total_bytes() >= mem) {
          mem = d->total_bytes();
          cap = d->capacity_bytes;
        }
      }
      std::sort(ids.begin(), ids.end());
      const std::string who = std::to_string(ds.size() * static_cast<std::size_t>(t)) + " " + c.types[it->first.first].name +
                              (t > 1 ? " tp" + std::to_string(t) : "") + " " + device_list(c, ids);
      char busy[64];
      std::snprintf(busy, sizeof busy, "%s (%.0f%%)", seconds(busy_hi).c_str(), 100 * busy_hi / p.step_seconds);
      // GiB for GPUs, MiB for the small memories of emulated devices.
      const bool small = cap < 4 * kGiB;
      const double unit = small ? 1024.0 * 1024 : kGiB;
      out += line("  %-5s  %-6s  %-30.30s  %13d  %-19s  %7.2f / %7.2f %s", first ? std::to_string(g).c_str() : "",
                  first ? layers.c_str() : "", who.c_str(), it->first.second, busy, mem / unit, cap / unit,
                  small ? "MiB" : "GiB");
      first = false;
    }
  }
  if (!ch.tp_notes.empty()) {
    // Each stage's TP degree and the estimated stage time of the others at the same layers: a
    // rank of t devices does 1/t of the work at the lower efficiency of smaller kernels, plus per
    // layer 2 all-gathers and 2 reduce-scatters in F and in B and 4 all-gathers in W over the
    // machine's link (spec/tensor_parallel_plan.h); t > 1 wins where memory or too few
    // micro-batches for every device call for it and the link is fast.
    out += "  tensor parallelism per stage (estimated stage time of the other degrees at the same layers; TP\n"
           "  costs each device's 1/t of the work at a lower efficiency plus its collectives):\n";
    for (std::size_t g = 0; g < ch.tp_notes.size(); ++g) out += line("    stage %zu: %s", g, ch.tp_notes[g].c_str());
  }
  return out;
}

std::string format_result(const PlanningProblem& problem, const PlannerResult& result, bool verbose) {
  std::string out = format_problem(problem);
  out += line("search     %zu groupings, %zu layouts estimated, %zu simulated, in %.2f s", result.groupings,
              result.estimated, result.simulated, result.seconds);
  if (result.min_unit_tokens > 0) {
    out += line("segments   units of at least %lld tokens (micro-batch size x shortest segment; %s)",
                static_cast<long long>(result.min_unit_tokens), result.min_unit_source.c_str());
  }
  if (result.family_best.size() > 1) {
    // Which family won and by how much: each family's best simulated step against the winner's,
    // and the newer families' best against the eight's (their own simulation slots: planner.cpp).
    const double best = result.family_best.front().step_seconds;
    std::string families;
    const PlannerResult::FamilyBest *best_newer = nullptr, *best_classic = nullptr;
    for (const auto& f : result.family_best) {  // best first
      char gap[32] = "";
      if (&f != &result.family_best.front()) std::snprintf(gap, sizeof gap, " (%+.1f%%)", 100.0 * (f.step_seconds / best - 1.0));
      families += (families.empty() ? "" : ", ") + f.family + (f.newer ? "*" : "") + " " + seconds(f.step_seconds) + gap;
      const PlannerResult::FamilyBest*& first = f.newer ? best_newer : best_classic;
      if (!first) first = &f;
    }
    out += "families   best simulated step of each: " + families + "\n";
    if (best_newer && best_classic) {
      const double gain = 100.0 * (1.0 - best_newer->step_seconds / best_classic->step_seconds);
      out += line("           * newer families (issue 25): the best, %s, is %.1f%% %s than the best of the eight, %s",
                  best_newer->family.c_str(), std::abs(gain), gain >= 0 ? "faster" : "slower", best_classic->family.c_str());
    }
  }
  if (!result.reference.empty()) {
    out += "even       planned as if every device were " + result.reference +
           "; predictions below are on the real devices\n";
  }
  if (verbose) {
    out += "shortlist  estimated -> simulated step (planning speeds)\n";
    for (const auto& s : result.shortlist) {
      out += line("  %-10s -> %-10s %s%s", seconds(s.estimated_step).c_str(), seconds(s.simulated_step).c_str(),
                  s.summary.c_str(), s.over_memory.empty() ? "" : ("  OVER MEMORY: " + s.over_memory).c_str());
    }
  }
  out += "\n";
  if (result.plans.empty()) return out;
  out += format_plan(problem, result.plans[0], "chosen plan");
  if (!result.assumed.empty()) {
    out += line("  (as planned on alike devices: step %s, %.0f tokens/s)", seconds(result.assumed[0].step_seconds).c_str(),
                result.assumed[0].tokens_per_second);
  }
  if (result.plans.size() > 1) {
    out += "\nrunner-ups (simulated)\n";
    const double best = result.plans[0].prediction.tokens_per_second;
    for (std::size_t i = 1; i < result.plans.size(); ++i) {
      const Plan& p = result.plans[i];
      out += line("  #%zu  step %-10s %9.0f tokens/s  %5.3fx  %s", i + 1, seconds(p.prediction.step_seconds).c_str(),
                  p.prediction.tokens_per_second, p.prediction.tokens_per_second / best,
                  p.choice.summary(problem.cluster).c_str());
    }
  }
  return out;
}

}  // namespace plait::plan
