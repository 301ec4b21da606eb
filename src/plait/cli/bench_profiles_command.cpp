// `plait bench profiles`: the device curves (sim/latency_curve.h) held out on Zorse's measured
// tables (or any latency table): per GPU type, the relative error of predicting the micro-batch
// sizes a fit did not see, for the fitted curve and for a straight line fitted the same way.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "plait/cli/commands.h"
#include "plait/core/json_fields.h"
#include "plait/sim/latency_validation.h"
#include "plait/sim/shipped_data.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::cli {

namespace {

struct BenchProfilesOptions {
  std::string table;  // empty: the shipped Zorse table
  double goal = 5.0;  // per cent
  bool detail = false;
};

double pct(double x) { return 100.0 * x; }

void run_bench_profiles(const BenchProfilesOptions& o) {
  const std::string path = o.table.empty() ? sim::shipped_data_path("profiles/zorse/model_latencies.json") : o.table;
  const sim::LatencyTable table = sim::read_latency_table(path, false);
  const auto interpolated = sim::validate_latency_curves(table, sim::HoldOut::interpolate);
  const auto extrapolated = sim::validate_latency_curves(table, sim::HoldOut::extrapolate);
  const nlohmann::json stats = o.table.empty() ? sim::zorse_model_stats() : nlohmann::json::object();
  const auto across = sim::validate_across_sequences(table, stats);
  std::printf("plait bench profiles: %s\n", path.c_str());
  std::printf("per layer, forward and backward ms at micro-batch 1..N of each (model, sequence, dtype) with N >= 4;\n"
              "held out: fit on the odd micro-batch sizes and N, predict the even ones (interpolation), and fit\n"
              "on b <= N/2, predict the rest (extrapolation). Errors are |predicted - measured| / measured over\n"
              "the held-out points; curve = fixed cost + rate with a knee where it pays (latency_curve.h), line =\n"
              "fixed cost + rate alone (Zorse's form).\n\n");

  // Per GPU type: both dtypes, forward and backward together.
  struct Pooled {
    sim::HeldOutErrors in, out;
    int entries = 0;
  };
  std::map<std::string, Pooled> by_type;
  for (std::size_t i = 0; i < interpolated.size(); ++i) {
    Pooled& p = by_type[interpolated[i].device];
    const sim::HeldOutErrors a = interpolated[i].both(), b = extrapolated[i].both();
    p.in.curve.insert(p.in.curve.end(), a.curve.begin(), a.curve.end());
    p.in.line.insert(p.in.line.end(), a.line.begin(), a.line.end());
    p.out.curve.insert(p.out.curve.end(), b.curve.begin(), b.curve.end());
    p.out.line.insert(p.out.line.end(), b.line.begin(), b.line.end());
    p.entries += interpolated[i].entries;
  }
  std::printf("%-14s %7s %6s   %-30s   %s\n", "", "", "", "interpolation (mean, max)", "extrapolation (mean)");
  std::printf("%-14s %7s %6s   %8s %8s %10s   %8s %8s\n", "gpu type", "entries", "points", "curve", "(max)", "line",
              "curve", "line");
  std::string over;
  for (const auto& [type, p] : by_type) {
    const double mean = pct(p.in.mean(p.in.curve));
    std::printf("%-14s %7d %6zu   %7.2f%% %7.1f%% %9.2f%%   %7.2f%% %7.2f%%  %s\n", type.c_str(), p.entries,
                p.in.curve.size(), mean, pct(p.in.max(p.in.curve)), pct(p.in.mean(p.in.line)),
                pct(p.out.mean(p.out.curve)), pct(p.out.mean(p.out.line)), mean <= o.goal ? "" : "OVER GOAL");
    if (mean > o.goal) over += (over.empty() ? "" : ", ") + type;
  }
  const std::vector<std::string> none = sim::devices_without_samples(table);
  if (!none.empty()) {
    std::string list;
    for (const std::string& d : none) list += (list.empty() ? "" : ", ") + d;
    std::printf("\nno samples to hold out (the table gives only fitted lines for them): %s\n", list.c_str());
  }
  std::printf("\ngoal: interpolation mean within %.0f%%; %s\n", o.goal,
              over.empty() ? "every type with samples meets it"
                           : ("over it: " + over + " (why: docs/simulator.md, \"Device curves\")").c_str());
  if (!across.empty()) {
    std::printf("\nacross sequence lengths (the case of segments: less work than the sequence measured): the\n"
                "curves of each model's longest measured sequence predict its shorter ones, work scaled by\n"
                "FLOPs (model_stats.json); line = that entry's straight line from the table, as read before\n"
                "the curves. Mean error over every micro-batch size, forward and backward:\n");
    std::printf("%-14s %-8s %7s %6s   %8s %8s\n", "gpu type", "dtype", "entries", "points", "curve", "line");
    for (const sim::DeviceValidation& v : across) {
      const sim::HeldOutErrors e = v.both();
      std::printf("%-14s %-8s %7d %6zu   %7.2f%% %7.2f%%\n", v.device.c_str(), v.dtype.c_str(), v.entries,
                  e.curve.size(), pct(e.mean(e.curve)), pct(e.mean(e.line)));
    }
  }
  if (!o.detail) return;
  std::printf("\n%-14s %-8s %7s | %-21s | %-21s\n", "gpu type", "dtype", "entries", "forward curve / line",
              "backward curve / line  (interpolation means)");
  for (const sim::DeviceValidation& v : interpolated) {
    std::printf("%-14s %-8s %7d | %8.2f%% / %6.2f%% | %8.2f%% / %6.2f%%\n", v.device.c_str(), v.dtype.c_str(),
                v.entries, pct(v.forward.mean(v.forward.curve)), pct(v.forward.mean(v.forward.line)),
                pct(v.backward.mean(v.backward.curve)), pct(v.backward.mean(v.backward.line)));
  }
}

void register_bench_profiles(CLI::App& app) {
  CLI::App* bench = command_group(app, "bench", "Benchmarks that print figures");
  auto* cmd = bench->add_subcommand(
      "profiles", "Held-out error of the device curves on Zorse's measured per-layer latencies, per GPU type");
  auto o = std::make_shared<BenchProfilesOptions>();
  cmd->add_option("--table", o->table, "A latency table in Zorse's format (default: the shipped Zorse table)")
      ->type_name("FILE");
  cmd->add_option("--goal", o->goal, "Per cent: mark the types whose interpolation mean is above it")
      ->capture_default_str();
  cmd->add_flag("--detail", o->detail, "Also list every (GPU type, dtype) with forward and backward apart");
  cmd->callback([o] { run_bench_profiles(*o); });
}

const CommandRegistration kRegistration(215, register_bench_profiles);

}  // namespace
}  // namespace plait::cli
