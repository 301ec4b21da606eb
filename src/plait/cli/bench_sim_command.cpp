// `plait bench sim`: how long generating, validating, lowering and simulating one large
// schedule takes (the simulator's performance point: p = 64, m = 1024, k = 8 under a second).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "plait/cli/commands.h"
#include "plait/core/error.h"
#include "plait/schedule/schedule_family.h"
#include "plait/spec/model_presets.h"
#include "plait/sim/simulation.h"

namespace plait::cli {

namespace {

struct BenchSimOptions {
  int pp = 64, microbatches = 1024, segments = 8, chunks = 2, repeat = 3;
  std::string schedule = "seq1f1b", model = "gpt-30b";
  long long seq = 32768;
  bool events = false;
};

void run_bench_sim(const BenchSimOptions& o) {
  const schedule::ScheduleFamily* family = schedule::find_schedule_family(o.schedule);
  if (!family) {
    throw Error("--schedule: unknown schedule '" + o.schedule + "'; expected one of " +
                schedule::schedule_family_names());
  }
  if (o.repeat < 1) throw Error("--repeat: expected at least 1, found " + std::to_string(o.repeat));
  sim::SimulationConfig config;
  config.seq = o.seq;
  config.model = spec::resolve_model(o.model, o.seq);
  config.shape = {o.pp, family->fixed_chunks > 0 ? family->fixed_chunks : o.chunks, o.microbatches,
                  family->sequence_level ? o.segments : 1};
  config.record_events = o.events;
  sim::PhaseSeconds best;
  double best_total = 1e300;
  sim::SimulationReport report;
  for (int i = 0; i < o.repeat; ++i) {
    report = sim::simulate_family(config, *family);
    if (report.seconds.total() < best_total) {
      best_total = report.seconds.total();
      best = report.seconds;
    }
  }
  std::printf("plait bench sim: %s, p=%d v=%d m=%d k=%d, %s, seq %lld, events %s\n", family->name.c_str(),
              config.shape.stages, config.shape.chunks, config.shape.microbatches, config.shape.segments,
              config.model.name.c_str(), o.seq, o.events ? "recorded" : "not recorded");
  std::printf("actions %lld, simulated step %.3f s, bubble %.2f%%\n",
              static_cast<long long>(report.schedule.num_actions()), report.result.step_time,
              100 * report.result.bubble_fraction);
  std::printf("best of %d: generate %.3f s, validate %.3f s, lower %.3f s, simulate %.3f s, total %.3f s\n",
              o.repeat, best.generate, best.validate, best.lower, best.simulate, best.total());
  std::printf("%.1f M actions/s end to end\n", report.schedule.num_actions() / best.total() / 1e6);
}

void register_bench_sim(CLI::App& app) {
  CLI::App* bench = command_group(app, "bench", "Benchmarks that print figures");
  auto* cmd = bench->add_subcommand(
      "sim", "Time schedule generation, validation (incl. deadlock check), lowering and simulation");
  auto o = std::make_shared<BenchSimOptions>();
  cmd->add_option("--pp", o->pp, "Pipeline ranks p")->capture_default_str();
  cmd->add_option("--microbatches", o->microbatches, "Micro-batches m")->capture_default_str();
  cmd->add_option("--segments", o->segments, "Segments k (sequence-level schedules)")->capture_default_str();
  cmd->add_option("--chunks", o->chunks, "Chunks v (interleaved schedules)")->capture_default_str();
  cmd->add_option("--schedule", o->schedule, "Schedule family")->capture_default_str();
  cmd->add_option("--model", o->model, "Model preset (needs at least p*v layers)")->capture_default_str();
  cmd->add_option("--seq", o->seq, "Sequence length")->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "Runs; the fastest is reported")->capture_default_str();
  cmd->add_flag("--events", o->events, "Also record the timed events (as --trace/--html need)");
  cmd->callback([o] { run_bench_sim(*o); });
}

const CommandRegistration kRegistration(210, register_bench_sim);

}  // namespace
}  // namespace plait::cli
