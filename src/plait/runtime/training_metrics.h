#pragma once
// The `--metrics FILE` of `plait train` (docs/runtime.md, "Metrics and the training report"):
// one JSON object per line, appended (a resumed run adds to its file):
//
//   {"run": {"config", "model", "parameters", "ranks", "schedule", "precision", "tokens_per_step",
//            "start_step", "stages": ["0", "1", ...]}}                         a run starts
//   {"step", "loss", "grad_norm", "lr", "skipped"[, "nonfinite"],
//    "perf": {"step_seconds", "tokens_per_second", "peak_memory_bytes": [per rank],
//             "seconds_per_unit": [per rank], "wait_seconds": [per rank]}}       a step
//   {"step", "straggler": {"rank", "flagged", "vs_history", "vs_peers"}}      a straggler flagged
//                                                                             or cleared
//   {"step", "rebalance": {"stages", "ranks", "before", "after", "rank", "flagged", "slowdown",
//                          "decide_seconds"}}          a stage's micro-batch shares changed
//                                                      after the step (share_rebalancer.h)
//   {"step", "move_layers": {"made", "from", "to", "layers", "before", "after", "rank", "flagged",
//                            "slowdown", "bytes", "cost_seconds", "saved_per_step", "horizon",
//                            "gain_seconds", "seconds", "transfer_seconds", "why"}}
//                                                      a layer move considered after the step,
//                                                      made or declined (layer_mover.h)
//   {"step", "val_loss"}                                                     a validation
//   {"step", "sample": "text"}                                               a sample
//   {"memory": [{"rank", "stages", "peak_bytes": {category: bytes}, "peak_total_bytes",
//                "capacity_bytes"}], "host_memory": [...]}                  a run ends
//
// The deterministic numbers (loss, grad_norm, lr, val_loss) are written in shortest round-trip
// form, so two runs compare bit for bit; "perf" holds what the clock and the allocator measured
// (step_seconds: the slowest rank's step, barrier to optimizer end; tokens_per_second: the
// step's tokens over it; peak_memory_bytes: each rank's peak of its device memory so far;
// seconds_per_unit: each rank's compute time per unit of work, the straggler detector's measure;
// wait_seconds: each rank's time blocked on stage inputs, the barrier and gradient reductions;
// both absent in files older than them).
//
// read_training_metrics reads such a file strictly (an error names the file, the line and the
// field); training_report turns it into the charts and tables of `plait report`.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/core/memory_tracker.h"
#include "plait/trace/html_report.h"

namespace plait::runtime {

struct MetricsStep {
  std::int64_t step = 0;
  double loss = 0, grad_norm = 0, lr = 0;
  bool skipped = false;
  std::optional<double> step_seconds, tokens_per_second;
  std::vector<double> peak_memory_bytes;  // per rank
  std::vector<double> seconds_per_unit, wait_seconds;  // per rank
};

struct MetricsStraggler {
  std::int64_t step = 0;
  int rank = 0;
  bool flagged = true;
  double vs_history = 1, vs_peers = 1;
};

// A re-balance of one stage group's micro-batch shares (runtime::ShareChange).
struct MetricsRebalance {
  std::int64_t step = 0;
  std::vector<std::int64_t> stages, ranks, before, after;
  int rank = 0;  // the rank whose flag or clear decided it
  bool flagged = true;
  double slowdown = 1, decide_seconds = 0;
};

// A layer move considered (runtime::LayerMove): made, or declined and why.
struct MetricsLayerMove {
  std::int64_t step = 0;
  bool made = false;
  int from = 0, to = 0, layers = 0;
  std::vector<std::int64_t> before, after;  // layers per virtual stage
  int rank = 0;                             // the rank whose flag or clear decided it
  bool flagged = true;
  double slowdown = 1, bytes = 0, cost_seconds = 0, saved_per_step = 0, gain_seconds = 0;
  std::int64_t horizon = 0;
  double seconds = 0, transfer_seconds = 0;  // measured, when made
  std::string why;
};

struct MetricsRankMemory {
  int rank = 0;
  std::string stages;
  std::array<double, kMemoryCategoryCount> peak{};
  double peak_total = 0;
  std::optional<double> capacity;
};

struct TrainingMetrics {
  std::string file;
  std::vector<nlohmann::json> runs;  // each run record's object
  std::vector<MetricsStep> steps;    // by step; a step recorded twice (a rerun) keeps the last
  std::vector<std::pair<std::int64_t, double>> validations;
  std::vector<std::pair<std::int64_t, std::string>> samples;
  std::vector<MetricsStraggler> stragglers;  // in file order
  std::vector<MetricsRebalance> rebalances;  // in file order
  std::vector<MetricsLayerMove> moves;       // in file order
  std::vector<MetricsRankMemory> memory, host_memory;  // the last run's end
};

TrainingMetrics read_training_metrics(const std::string& path);

// The report: a summary, charts of the training and validation loss, learning rate, gradient
// norm and tokens/s over steps (the re-balances and layer moves marked on the last), the per-rank memory table (and the host tier's, when used) and
// the last samples.
trace::Report training_report(const TrainingMetrics& metrics);

// The JSON of one rank's memory in the "memory" record.
nlohmann::json rank_memory_json(int rank, const std::string& stages, const MemoryReport& report,
                                std::optional<std::size_t> capacity);

}  // namespace plait::runtime
