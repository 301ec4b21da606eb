// `plait bench runtime memory|speed` (run under mpirun): the distributed runtime measured next to
// the simulator's prediction for the same run (docs/runtime.md, "Benchmarks").
//   memory: p ranks (default 4), each family (gpt2, llama) and precision (fp32, bf16), each
//           schedule with each --recompute value: every rank's measured bytes per category
//           (static ones, and the peaks of activations, K/V, their sum and comm buffers) against
//           the model description's static bytes and sim::simulate with the engine's exact unit
//           memory (spec/unit_memory.h in the row's precision, action by action), and Seq1F1B's
//           stage-0 peak against 1F1B's; then shard levels 0-3 with and without offload, per
//           family and precision, against runtime::predicted_memory.
//   speed:  p ranks (default 2), one thread each, each schedule's measured pipeline step time
//           against sim::simulate fed with this machine's measured per-unit engine times
//           (runtime/profile_cost_model.h) and a measured link latency. With --documents, three
//           more rows on packed documents (stream, plain order, balanced), each measured step
//           predicted from its own micro-batches' documents (sim/document_cost_model.h), with
//           every rank's peak activations against the memory planned for the steps' worst cut.
//   --tp t: every row on p / t pipeline ranks of t-rank TP groups (parallel.tp; memory against the
//           TP unit table, speed with per-rank TP unit profiles plus the collectives over the TP
//           group's measured link); --slowdown f: every device emulated f times slower.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "plait/cli/commands.h"
#include "plait/cli/flag_values.h"
#include "plait/cli/parallel_flags.h"
#include "plait/comm/abort_job.h"
#include "plait/comm/mpi_session.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/data/balanced_order.h"
#include "plait/data/batch_loader.h"
#include "plait/data/document_distribution.h"
#include "plait/data/packed_sequences.h"
#include "plait/data/sequential_loader.h"
#include "plait/model/parameter_layout.h"
#include "plait/runtime/copy_profiler.h"
#include "plait/runtime/data_parallel_model.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/microbatch_partition.h"
#include "plait/runtime/measured_step.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/profile_cost_model.h"
#include "plait/runtime/predicted_memory.h"
#include "plait/runtime/profile_json.h"
#include "plait/runtime/rank_gather.h"
#include "plait/runtime/tensor_parallel_group.h"
#include "plait/runtime/unit_profiler.h"
#include "plait/schedule/activation_offload.h"
#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/document_cost_model.h"
#include "plait/sim/document_work.h"
#include "plait/sim/event_simulator.h"
#include "plait/sim/memory_model.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::cli {
namespace {

struct BenchRuntimeOptions {
  int layers = 8, hidden = 64, heads = 4, seq = 1024, microbatch_size = 1, microbatches = 8;
  int segments = 4, chunks = 2, steps = 1, repeats = 5;
  std::string split = "even";
  std::string schedules;
  std::string profile;  // speed: a segment profile file instead of measuring
  // parallel.recompute values, one row set each (memory: every schedule with each; speed: the
  // schedules again with each but "none").
  std::vector<std::string> recompute = {"none", "full"};
  // speed: a further row set, `segment_family` at each of these segment counts (many short
  // segments against few long ones), without recomputation; empty: none.
  std::string segment_counts;
  std::string segment_family = "seq1f1b";
  std::string shard_schedule = "1f1b";  // the sharding rows' family (pp 1 x dp p)
  // memory: one row set per family and precision; speed: the first of each.
  std::vector<std::string> families = {"gpt2", "llama"};
  std::vector<std::string> precisions = {"fp32", "bf16"};
  // train.grad_reduce of the bf16 rows: what data parallelism reduces.
  std::string grad_reduce = "fp32";
  // parallel.offload levels to run each memory and speed row with: "none" and/or "activations"
  // (every stage; runtime/activation_offload.h), the copy engine paced to host_gbyte_per_s.
  std::vector<std::string> offload = {"none"};
  double host_gbyte_per_s = 4;
  // parallel.tp of every row (the job's ranks are p / tp pipeline ranks x tp), and every emulated
  // device's slow-down (runtime/device_emulator.h; 1: the ranks run at the core's speed).
  int tp = 1;
  double slowdown = 1;
  // speed: packed documents of this length distribution (data/document_distribution.h): three
  // more rows of `segment_family` with a flops split (stream windows, packed in plain order,
  // packed and balanced with windows of balance_window steps); empty: none.
  std::string documents;
  int balance_window = 1;
  // speed: data-parallel replicas of every row's pipeline (pp = p / dp stages, each replica m
  // micro-batches of the step's dp x m); the document rows then show the replicas' imbalance.
  int dp = 1;
};

// The pipeline ranks of a job of `world` processes: world / --tp.
int pipeline_ranks(const BenchRuntimeOptions& o, int world) {
  if (o.tp < 1 || world % o.tp != 0) {
    throw Error("--tp " + std::to_string(o.tp) + " does not divide the job's " + std::to_string(world) +
                " ranks (run mpirun -np a multiple of it)");
  }
  return world / o.tp;
}

// The benchmark's model: GPT-2 of the given sizes (vocabulary 256, byte tokens), or a LLaMA of
// the same depth and width with grouped-query attention (half as many K/V heads, where heads is
// even), SwiGLU of width 8/3 x hidden rounded up to a multiple of 16 (LLaMA's rule, Touvron et
// al. 2023, sec. 2.2) and an untied head, so both families' unit tables are measured.
spec::ModelSpec bench_model(const BenchRuntimeOptions& o, const std::string& family) {
  spec::ModelSpec m = spec::gpt2_model(o.layers, o.hidden, o.heads, 256, o.seq);
  if (family == "gpt2") return m;
  if (family != "llama") throw Error("--families: expected gpt2 or llama, found '" + family + "'");
  m.family = spec::Family::llama;
  m.kv_heads = o.heads % 2 == 0 ? o.heads / 2 : o.heads;
  m.ffn_hidden = (8 * o.hidden / 3 + 15) / 16 * 16;
  m.tie_embeddings = false;
  spec::check_model_spec(m, "plait bench runtime");
  return m;
}

spec::Precision bench_precision(const std::string& name) {
  if (name == "fp32") return spec::Precision::fp32;
  if (name == "bf16") return spec::Precision::bf16;
  throw Error("--precisions: expected fp32 or bf16, found '" + name + "'");
}

// A job of `world` pipeline ranks for one schedule family (k segments for the sequence-level
// families, 1 for the others).
runtime::JobConfig bench_job(const BenchRuntimeOptions& o, const std::string& schedule, int world,
                              int segments = 0, const std::string& model_family = "gpt2",
                              const std::string& precision = "fp32") {
  const schedule::ScheduleFamily* family = schedule::find_schedule_family(schedule);
  if (family == nullptr) {
    throw Error("--schedules: unknown schedule '" + schedule + "'; expected one of " +
                schedule::schedule_family_names());
  }
  runtime::JobConfig job;
  job.run.source = "plait bench runtime";
  job.run.model = bench_model(o, model_family);
  runtime::TrainConfig& t = job.run.train;
  t.precision = bench_precision(precision);
  if (t.precision == spec::Precision::bf16 && o.grad_reduce == "bf16") t.grad_reduce = spec::GradReduce::bf16;
  t.steps = o.steps + 1;
  t.seq = o.seq;
  t.microbatch_size = o.microbatch_size;
  t.microbatches = o.microbatches;
  t.lr = 1e-3;
  t.warmup_steps = 0;
  const int k = family->sequence_level ? (segments > 0 ? segments : o.segments) : 1;
  if (k > 1) {
    t.segments.count = k;
    t.segments.split = spec::parse_split_method(o.split);
    job.parallel.split = o.split;
  }
  job.parallel.schedule = schedule;
  job.parallel.pp = world;
  job.parallel.dp = 1;
  job.parallel.chunks = family->fixed_chunks == 0 ? o.chunks : 0;
  if (o.tp > 1) job.parallel.tp = {o.tp};
  if (o.slowdown != 1) {
    job.parallel.devices.resize(static_cast<std::size_t>(world));
    for (runtime::DeviceEmulation& d : job.parallel.devices) d.slowdown = o.slowdown;
  }
  return job;
}

// The sharding rows' job: --shard-schedule on one stage held by all p ranks (pp 1 x dp p) at
// `level`, offloaded or not (every rank with a host tier of 1 TiB).
runtime::JobConfig shard_job(const BenchRuntimeOptions& o, int p, int level, bool offload,
                             const std::string& family, const std::string& precision) {
  runtime::JobConfig job = bench_job(o, o.shard_schedule, 1, 0, family, precision);
  job.parallel.dp = p;
  job.parallel.shard = {level};
  job.parallel.offload = {offload};
  job.parallel.devices.resize(static_cast<std::size_t>(p),
                              job.parallel.devices.empty() ? runtime::DeviceEmulation{} : job.parallel.devices.front());
  for (runtime::DeviceEmulation& d : job.parallel.devices) d.host_memory_bytes = std::size_t{1} << 40;
  return job;
}

// Activation offload on every stage of `job` (`level` "activations"; "none" leaves it), every
// rank with a host tier of 1 TiB reached at --host-gbyte-per-s.
void apply_offload(const BenchRuntimeOptions& o, runtime::JobConfig& job, int ranks, const std::string& level) {
  if (level == "none") return;
  job.parallel.offload = {false};
  job.parallel.offload_activations = {true};
  job.parallel.devices.resize(static_cast<std::size_t>(ranks));
  for (runtime::DeviceEmulation& d : job.parallel.devices) {
    d.host_memory_bytes = std::size_t{1} << 40;
    d.host_bytes_per_second = o.host_gbyte_per_s * 1e9;
  }
}

// Random tokens (the benchmarks time the engine, not the data).
struct RandomTokens {
  explicit RandomTokens(std::size_t n) : tokens(n) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> dist(0, 255);
    for (auto& t : tokens) t = static_cast<std::uint16_t>(dist(rng));
  }
  std::vector<std::uint16_t> tokens;
};

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

// One rank's measured bytes by category during the measured step: the static categories'
// current bytes, the peaks of the others, and the peak of activations + K/V together.
struct CategoryBytes {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, kv = 0, units = 0, comm = 0;
};

// A trainer for `job` with comm buffers on their own tracker, after `warm_up` steps, its peaks
// (device and host tier) reset: the next step is the measured one.
struct MeasuredTrainer {
  runtime::PipelinePlan plan;
  runtime::TrainConfig train;
  data::BatchLoader loader;
  MemoryTracker tracker, buffers;
  std::unique_ptr<runtime::DistributedTrainer> trainer;

  MeasuredTrainer(comm::Communicator& world, const runtime::JobConfig& job, const RandomTokens& data, int warm_up)
      : plan(runtime::build_pipeline_plan(job, world.size())),
        train(job.global_train()),
        loader(data.tokens, train.seq, train.microbatch_size, train.microbatches, 1) {
    runtime::TrainerOptions options;
    options.buffer_tracker = &buffers;
    trainer = std::make_unique<runtime::DistributedTrainer>(plan, train, world, tracker, options);
    for (int s = 0; s < warm_up; ++s) trainer->step(s, loader);
    tracker.reset_peaks();
    trainer->host_tracker().reset_peaks();
  }
};

struct MemoryRow {
  std::string family, precision, schedule, recompute, offload;
};

// The memory bench's row sets: every family, precision, schedule and recompute value, in that
// nesting order.
std::vector<MemoryRow> memory_rows(const BenchRuntimeOptions& o, const std::vector<std::string>& schedules) {
  std::vector<MemoryRow> rows;
  for (const std::string& family : o.families) {
    for (const std::string& precision : o.precisions) {
      for (const std::string& schedule : schedules) {
        for (const std::string& recompute : o.recompute) {
          for (const std::string& offload : o.offload) rows.push_back({family, precision, schedule, recompute, offload});
        }
      }
    }
  }
  return rows;
}

void run_memory(comm::Communicator& world, const BenchRuntimeOptions& o) {
  const int p = world.size();
  const int pp = pipeline_ranks(o, p);  // job rank r is TP rank r % tp of pipeline rank r / tp
  const bool lead = world.rank() == 0;
  const std::vector<std::string> schedules =
      comma_list(o.schedules.empty() ? "gpipe,1f1b,seq1f1b,zb-h1" : o.schedules);
  const RandomTokens data(1 << 20);
  if (lead) {
    std::printf("plait bench runtime memory: p = %d ranks (pp %d x tp %d), model %d layers x hidden %d, %d heads, "
                "seq %d, micro-batch %d, m = %d, k = %d (%s split) for sequence-level schedules\n",
                p, pp, o.tp, o.layers, o.hidden, o.heads, o.seq, o.microbatch_size, o.microbatches, o.segments,
                o.split.c_str());
    std::printf("each rank's bytes by category during step %d, measured by its memory tracker (peaks; "
                "parameters, gradients and optimizer state stay put), and the error of the prediction: "
                "static bytes from the model description, activations and K/V from sim::simulate of the "
                "same schedule with the exact unit table (spec/unit_memory.h, action by action); "
                "units = peak of activations + K/V together; comm buffers (on their own tracker) are "
                "not modelled%s\n",
                o.steps,
                o.tp > 1 ? "; tp comm = the TP collectives' buffers on the stage's tracker (units include them) against "
                           "spec::UnitMemory::communication (StaticMemory::communication, one at a time)"
                         : "");
    std::printf("%-5s %-4s %-10s %-9s %-7s %4s | %17s %17s %17s | %17s %17s %17s | %10s%s\n", "model", "prec",
                "schedule", "recompute", "offload", "rank", "parameters", "gradients", "optimizer_state", "activations",
                "kv_cache", "units", "comm", o.tp > 1 ? " |           tp comm" : "");
  }
  std::vector<double> stage0;  // measured stage-0 units peak per schedule, without recomputation
  for (const auto& [family, precision, name, variant, offload] : memory_rows(o, schedules)) {
    {
      runtime::JobConfig job = bench_job(o, name, pp, 0, family, precision);
      job.parallel.recompute = parse_recompute_flag("--recompute", variant);
      apply_offload(o, job, pp, offload);
      const runtime::PipelinePlan plan = runtime::build_pipeline_plan(job, p);
      const runtime::TrainConfig t = job.global_train();
      const data::BatchLoader loader(data.tokens, t.seq, t.microbatch_size, t.microbatches, 1);
      MemoryTracker tracker, buffers;
      runtime::TrainerOptions options;
      options.buffer_tracker = &buffers;
      runtime::DistributedTrainer trainer(plan, t, world, tracker, options);
      for (int s = 0; s < o.steps; ++s) trainer.step(s, loader);  // warm-up
      tracker.reset_peaks();
      buffers.reset_peaks();
      trainer.step(o.steps, loader);
      const auto current = [&](MemoryCategory c) { return static_cast<double>(tracker.current(c)); };
      const double fixed = current(MemoryCategory::kParameters) + current(MemoryCategory::kGradients) +
                           current(MemoryCategory::kOptimizerState);
      const std::vector<double> mine = {current(MemoryCategory::kParameters),
                                        current(MemoryCategory::kGradients),
                                        current(MemoryCategory::kOptimizerState),
                                        static_cast<double>(tracker.peak(MemoryCategory::kActivations)),
                                        static_cast<double>(tracker.peak(MemoryCategory::kKVCache)),
                                        static_cast<double>(tracker.peak_total()) - fixed,
                                        static_cast<double>(buffers.peak(MemoryCategory::kCommBuffers)),
                                        static_cast<double>(tracker.peak(MemoryCategory::kCommBuffers))};
      const auto all = runtime::gather_all(world, mine);
      if (!lead) continue;
      const sim::MemoryModel memory(plan.model, plan.vstage_layers, plan.partition, plan.microbatch_size,
                                    {t.precision, job.parallel.recompute, omp_get_max_threads(), plan.vstage_tensor_parallel()});
      const schedule::LoweredSchedule lowered = schedule::lower(plan.schedule);
      const sim::UniformCostModel uniform(1.0, 1.0, 1.0);
      sim::SimOptions sim_options{false, false};
      const sim::ActivationOffloadModel offloads = runtime::activation_offload_model(plan);
      sim_options.activation_offload = &offloads;
      const sim::SimResult predicted = sim::simulate(plan.schedule, lowered, uniform, &memory, sim_options);
      for (int r = 0; r < p; ++r) {
        // Every TP rank of a pipeline rank holds the same bytes (its part of each tensor, 1/t of
        // each unit: spec/unit_memory.h at t).
        const int q = r / o.tp;
        const sim::StaticMemory st = memory.static_memory(plan.schedule.layout.rank_vstages[q]);
        const sim::AllocatedPeaks& a = predicted.ranks[q].allocated;
        // Under TP the stage's own tracker also holds its collectives' buffer (a gathered input or
        // an fp32 partial sum, one at a time, taken inside every action), so the peak of the sum
        // holds it too: StaticMemory::communication, 0 without TP.
        const double want[6] = {st.parameters, st.gradients, st.optimizer, a.activations, a.kv_cache,
                                a.total + st.communication};
        std::printf("%-5s %-4s %-10s %-9s %-7s %4d |", family.c_str(), precision.c_str(), name.c_str(), variant.c_str(),
                    offload == "none" ? "no" : "act", r);
        for (int c = 0; c < 6; ++c) {
          const double got = all[r][c];
          std::printf(" %8.2f MiB %+5.1f%%%s", mib(got), got > 0 ? 100 * (want[c] - got) / got : 0.0,
                      c == 2 ? " |" : "");
        }
        std::printf(" | %6.2f MiB", mib(all[r][6]));
        if (o.tp > 1) {
          const double got = all[r][7];
          std::printf(" | %6.2f MiB %+5.1f%%", mib(got), got > 0 ? 100 * (st.communication - got) / got : 0.0);
        }
        std::printf("\n");
      }
      if (variant == "none" && offload == "none" && family == o.families.front() && precision == o.precisions.front()) {
        stage0.push_back(all[0][5]);
      }
    }
  }
  if (!lead) return;
  const auto find = [&](const char* name) -> double {
    for (std::size_t i = 0; i < schedules.size() && i < stage0.size(); ++i) {
      if (schedules[i] == name) return stage0[i];
    }
    return 0;
  };
  if (find("seq1f1b") > 0 && find("1f1b") > 0) {
    const double k = o.segments, stages = pp;
    const double bound = (stages + k - 1) / (k * stages);
    std::printf("Seq1F1B stage-0 peak / 1F1B stage-0 peak = %.4f (textbook (p+k-1)/(k*p) = %.4f; "
                "limit x 1.1 = %.4f)\n",
                find("seq1f1b") / find("1f1b"), bound, 1.1 * bound);
  }
}

// Sharded data parallelism: one stage held by all p ranks (pp 1 x dp p; 1F1B unless
// --shard-schedule says otherwise), at levels 0-3
// with and without offload; per rank every category's measured peak during a step (device
// tracker, its host tier) against runtime::predicted_memory (the simulator's replay of
// spec/sharded_state.h), and the weights resident between steps.
struct ShardRow {
  std::string family, precision;
  int level;
  bool offload;
};

std::vector<ShardRow> shard_rows(const BenchRuntimeOptions& o) {
  std::vector<ShardRow> rows;
  for (const std::string& family : o.families) {
    for (const std::string& precision : o.precisions) {
      for (int level = 0; level <= 3; ++level) {
        for (bool offload : {false, true}) rows.push_back({family, precision, level, offload});
      }
    }
  }
  return rows;
}

void run_shard_memory(comm::Communicator& world, const BenchRuntimeOptions& o) {
  const int p = world.size();
  const bool lead = world.rank() == 0;
  if (p < 2) return;
  if (o.tp > 1) {
    if (lead) std::printf("\n(sharded data parallelism rows: pp 1 x dp p only, not run with --tp)\n");
    return;
  }
  const RandomTokens data(1 << 20);
  static constexpr const char* kNames[] = {"weights", "grads", "optim", "activ", "kv", "host w", "host opt",
                                           "host grad", "total", "comm"};
  if (lead) {
    std::printf("\nsharded data parallelism: %s, pp 1 x dp %d (one stage, %d layers, on every rank), m = %d per "
                "replica; per rank, each category's measured peak in MiB during step %d and its error against the "
                "prediction (runtime::predicted_memory: the simulator's replay of spec/sharded_state.h; comm = the "
                "comm buffers' peak against runtime::predicted_dp_comm_bytes, bf16 rows reducing %s gradients); "
                "'between' = weights resident between steps\n",
                o.shard_schedule.c_str(), p, o.layers, o.microbatches, o.steps, o.grad_reduce.c_str());
    std::printf("%-5s %-4s %-5s %-7s %4s", "model", "prec", "level", "offload", "rank");
    for (const char* n : kNames) std::printf(" %16s", n);
    std::printf(" %12s\n", "between");
  }
  for (const auto& [family, precision, level, offload] : shard_rows(o)) {
    {
      const runtime::JobConfig job = shard_job(o, p, level, offload, family, precision);
      MeasuredTrainer run(world, job, data, o.steps);
      const runtime::PipelinePlan& plan = run.plan;
      const MemoryTracker& tracker = run.tracker;
      run.trainer->step(o.steps, run.loader);
      const MemoryTracker& host = run.trainer->host_tracker();
      const auto d = [&](MemoryCategory c) { return static_cast<double>(tracker.peak(c)); };
      const auto h = [&](MemoryCategory c) { return static_cast<double>(host.peak(c)); };
      const std::vector<double> mine = {d(MemoryCategory::kParameters), d(MemoryCategory::kGradients),
                                        d(MemoryCategory::kOptimizerState), d(MemoryCategory::kActivations),
                                        d(MemoryCategory::kKVCache), h(MemoryCategory::kParameters),
                                        h(MemoryCategory::kOptimizerState), h(MemoryCategory::kGradients),
                                        static_cast<double>(tracker.peak_total()),
                                        static_cast<double>(run.buffers.peak(MemoryCategory::kCommBuffers)),
                                        static_cast<double>(tracker.current(MemoryCategory::kParameters))};
      const auto all = runtime::gather_all(world, mine);
      if (!lead) continue;
      const std::vector<sim::CategoryPeaks> predicted = runtime::predicted_memory(plan);
      for (int r = 0; r < p; ++r) {
        const sim::CategoryPeaks& q = predicted[static_cast<std::size_t>(r)];
        const double want[] = {q.parameters, q.gradients, q.optimizer, q.activations, q.kv_cache,
                               q.host_parameters, q.host_optimizer, q.host_gradients, q.total,
                               runtime::predicted_dp_comm_bytes(plan, r)};
        std::printf("%-5s %-4s %-5d %-7s %4d", family.c_str(), precision.c_str(), level, offload ? "yes" : "no", r);
        for (std::size_t i = 0; i < 10; ++i) {
          const double got = all[static_cast<std::size_t>(r)][i];
          if (want[i] == 0 && got == 0) {
            std::printf(" %16s", "0");
          } else {
            std::printf(" %8.2f %+6.1f%%", mib(got), want[i] > 0 ? 100 * (got - want[i]) / want[i] : 100.0);
          }
        }
        std::printf(" %8.2f MiB\n", mib(all[static_cast<std::size_t>(r)][10]));
      }
    }
  }
  if (lead) {
    std::printf("error = (measured - predicted) / predicted; the prediction replays the engine's allocations action by "
                "action (sim RankResult::allocated) with each chunk's sharded state (spec/sharded_state.h)\n");
  }
}

// Half the round-trip time of `floats` floats between ranks 0 and `peer`, best of `trips`, with
// plait's own waits (the latency the pipeline's messages see).
double one_way_seconds(comm::Communicator& world, std::size_t floats, int trips, int peer) {
  std::vector<float> buffer(floats, 1.0f);
  double best = 1e30;
  world.barrier();
  for (int i = 0; i < trips; ++i) {
    const double t0 = monotonic_seconds();
    if (world.rank() == 0) {
      world.isend(buffer, peer, 7).wait();
      world.irecv(buffer, peer, 8).wait();
    } else if (world.rank() == peer) {
      world.irecv(buffer, 0, 7).wait();
      world.isend(buffer, 0, 8).wait();
    }
    best = std::min(best, (monotonic_seconds() - t0) / 2);
  }
  return world.allreduce(world.rank() == 0 ? best : 0.0, comm::ReduceOp::kSum);
}

// Every rank measures the segments at once (both cores busy, as during the run) and the
// per-unit times are averaged over the ranks.
// The most micro-batches any rank of the plan holds at once (the simulator's peak in flight,
// rounded up): how far from the caches a unit's backward finds its activations.
int peak_in_flight(const runtime::PipelinePlan& plan) {
  const sim::UniformCostModel uniform(1.0, 1.0, 1.0);
  const sim::SimResult r =
      sim::simulate(plan.schedule, schedule::lower(plan.schedule), uniform, nullptr, {false, false});
  double peak = 1;
  for (const sim::RankResult& rank : r.ranks) peak = std::max(peak, rank.peak_in_flight);
  return static_cast<int>(std::ceil(peak - 1e-9));
}

// The link between pipeline ranks (job ranks 0 and --tp: TP rank 0 of the first two stages):
// latency from a one-float ping-pong, bandwidth from one of a segment's activations (a TP rank's
// sequence slice of it).
sim::LinkProfile measure_link(comm::Communicator& world, const BenchRuntimeOptions& o) {
  const std::size_t big = static_cast<std::size_t>(o.microbatch_size) * o.seq * o.hidden / static_cast<std::size_t>(o.tp);
  const double small_t = one_way_seconds(world, 1, 200, o.tp);
  const double big_t = one_way_seconds(world, big, 50, o.tp);
  sim::LinkProfile link;
  link.latency_seconds = small_t;
  link.bandwidth_bytes_per_second =
      big_t > small_t ? static_cast<double>(big * sizeof(float)) / (big_t - small_t) : 1e12;
  return link;
}

// The TP group's link (--tp > 1), as the runtime's TP collectives see it: each group of --tp
// consecutive ranks (all groups at once, as in a step) times the runtime's own all-gather
// (CommTensorParallelGroup, counting each collective's time alone as the device emulator does),
// best of many trips, of one float per rank (the ring's (t-1) steps of latency) and of a whole
// micro-batch's N x C activations (the bandwidth: (t-1)/t x bytes over the time the latency leaves);
// averaged over the ranks. Also returns a reduce-scatter of the same fp32 bytes, which the ring
// model (spec::ring_collective_seconds) charges as an all-gather.
struct TpLink {
  sim::LinkProfile link;
  double bytes = 0, all_gather_seconds = 0, reduce_scatter_seconds = 0;
};
TpLink measure_tp_link(comm::Communicator& world, const BenchRuntimeOptions& o) {
  TpLink out;
  const int t = o.tp;
  if (t <= 1) return out;
  std::vector<std::vector<int>> lists;
  for (int g = 0; g < world.size() / t; ++g) {
    std::vector<int>& list = lists.emplace_back();
    for (int i = 0; i < t; ++i) list.push_back(g * t + i);
  }
  std::vector<std::unique_ptr<comm::Communicator>> groups = world.create_groups(lists);
  comm::Communicator* mine = nullptr;
  for (auto& g : groups) {
    if (g) mine = g.get();
  }
  runtime::CommTensorParallelGroup group(*mine);
  const std::size_t block = static_cast<std::size_t>(o.microbatch_size) * o.seq * o.hidden / static_cast<std::size_t>(t);
  std::vector<float> data(block * static_cast<std::size_t>(t), 1.0f);
  const auto best = [&](int trips, const auto& collective) {
    double fastest = 1e30;
    world.barrier();
    for (int i = 0; i < trips; ++i) {
      const double before = group.link_seconds();
      collective();
      fastest = std::min(fastest, group.link_seconds() - before);
    }
    return fastest;
  };
  const double small = best(200, [&] { group.all_gather(TypedPtr(data.data()), 1); });
  const double big = best(50, [&] { group.all_gather(TypedPtr(data.data()), block); });
  const double scatter = best(50, [&] { group.reduce_scatter(data.data(), block); });
  const auto mean = [&](double x) { return world.allreduce(x, comm::ReduceOp::kSum) / world.size(); };
  out.bytes = 4.0 * static_cast<double>(data.size());
  out.all_gather_seconds = mean(big);
  out.reduce_scatter_seconds = mean(scatter);
  const double latency = mean(small), share = (t - 1.0) / t;
  out.link.latency_seconds = latency / (t - 1.0);
  out.link.bandwidth_bytes_per_second =
      out.all_gather_seconds > latency ? share * out.bytes / (out.all_gather_seconds - latency) : 1e12;
  return out;
}

runtime::SegmentProfile measure_profile(comm::Communicator& world, const runtime::PipelinePlan& plan,
                                        int repeats, int in_flight, bool recompute) {
  runtime::ProfileOptions options;
  options.repeats = repeats;
  options.in_flight = in_flight;
  options.recompute = recompute;
  // Under TP each rank times its own part of a TP unit (--tp: every stage of one degree t, job
  // rank r is TP rank r % t), its compute alone; on emulated devices as they count an action (CPU
  // time, idling after each unit alike).
  options.tensor_parallel = plan.tensor_parallel(0);
  options.tp_rank = plan.tp_rank_of(world.rank());
  options.slowdown = plan.devices.front().slowdown;
  options.cpu_time = options.slowdown > 1;
  // A layer is timed inside a stage of as many layers as a rank holds, so weights and
  // activations compete for the caches as in the run (each layer is held by its stage's
  // data-parallel replicas: holders(0)).
  options.probe_layers = plan.model.layers * static_cast<int>(plan.holders(0).size()) / plan.num_ranks();
  runtime::SegmentProfile mine =
      runtime::profile_segments(plan.model, plan.microbatch_size, plan.partition, options);
  std::vector<double> packed;
  for (const auto* list : {&mine.layer, &mine.embedding, &mine.head}) {
    for (const runtime::UnitTimes& u : *list) {
      packed.insert(packed.end(), {u.forward, u.backward_input, u.backward_weight, u.recompute});
    }
  }
  const auto all = runtime::gather_all(world, packed);
  std::size_t i = 0;
  for (auto* list : {&mine.layer, &mine.embedding, &mine.head}) {
    for (runtime::UnitTimes& u : *list) {
      u = {};
      for (const auto& r : all) {
        u.forward += r[i] / all.size();
        u.backward_input += r[i + 1] / all.size();
        u.backward_weight += r[i + 2] / all.size();
        u.recompute += r[i + 3] / all.size();
      }
      i += 4;
    }
  }
  return mine;
}

// Combines measurements of the same units: per unit, the median of the measurements.
runtime::SegmentProfile combine(const std::vector<runtime::SegmentProfile>& all) {
  runtime::SegmentProfile out = all.front();
  const auto pick = [&](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (auto member : {&runtime::SegmentProfile::layer, &runtime::SegmentProfile::embedding,
                      &runtime::SegmentProfile::head}) {
    for (std::size_t j = 0; j < (out.*member).size(); ++j) {
      std::vector<double> f, b, w, rc;
      for (const runtime::SegmentProfile& p : all) {
        f.push_back((p.*member)[j].forward);
        b.push_back((p.*member)[j].backward_input);
        w.push_back((p.*member)[j].backward_weight);
        rc.push_back((p.*member)[j].recompute);
      }
      (out.*member)[j] = {pick(f), pick(b), pick(w), pick(rc)};
    }
  }
  return out;
}

// The mean of the rounds' values (a row's measured idle shares).
double round_mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// Step `step` of a document row as the runtime cuts it (runtime/microbatch_partition.h: the
// plan's partition, or with document_cuts each micro-batch's own), for sim::DocumentCostModel.
sim::StepDocuments document_step(const runtime::PipelinePlan& plan, const data::BatchSource& loader, std::int64_t step) {
  return sim::step_documents(plan.model, loader, step, {plan.partition, plan.document_cuts, plan.cut_multiple});
}

void run_speed(comm::Communicator& world, const BenchRuntimeOptions& o) {
  omp_set_num_threads(1);
  const int p = world.size();
  const int pp = pipeline_ranks(o, p);
  const bool lead = world.rank() == 0;
  if (o.dp > 1 && o.tp > 1) throw Error("--dp: not with --tp (the speed rows run pp x dp or pp x tp)");
  if (pp % o.dp != 0) {
    throw Error("--dp " + std::to_string(o.dp) + " does not divide the job's " + std::to_string(pp) +
                " ranks (run mpirun -np a multiple of it)");
  }
  const int stages = pp / o.dp;  // pipeline ranks of one replica
  // One stage is a row set only over data-parallel replicas (the bubble they wait out at the
  // gradient reduction, e.g. the document rows' imbalance between replicas).
  if (stages < 2 && o.dp < 2) {
    throw Error("plait bench runtime speed: run it under mpirun with at least 2 pipeline ranks (x --tp), or with --dp");
  }
  const std::vector<std::string> schedules =
      comma_list(o.schedules.empty() ? "gpipe,1f1b,interleaved,seq1f1b,seq1f1b-i,zb-h1,zb-v,seq-zb"
                                     : o.schedules);
  const RandomTokens data(1 << 20);
  const sim::LinkProfile link = measure_link(world, o);
  const TpLink tp_link = measure_tp_link(world, o);
  if (lead) {
    std::printf("plait bench runtime speed: p = %d ranks (pp %d x dp %d x tp %d) x 1 thread, devices x%.2g, model %d layers x "
                "hidden %d, %d heads, seq %d, micro-batch %d, m = %d, k = %d (%s split) for sequence-level "
                "schedules, v = %d for interleaved ones; %d rounds of (unit profiles, one step of "
                "every schedule) after a warm-up step\n",
                p, stages, o.dp, o.tp, o.slowdown, o.layers, o.hidden, o.heads, o.seq, o.microbatch_size, o.microbatches,
                o.segments, o.split.c_str(), o.chunks, o.steps);
    std::printf("link (measured ping-pong with plait's waits): %.1f us latency, %.2f GB/s\n",
                link.latency_seconds * 1e6, link.bandwidth_bytes_per_second / 1e9);
    if (o.tp > 1) {
      std::printf("TP link (the runtime's all-gather over each group of %d, time alone): %.1f us per ring step, "
                  "%.2f GB/s bus bandwidth; on %.2f MiB: all-gather %.1f us, reduce-scatter %.1f us (the ring model "
                  "charges both %.1f us); units: per-rank compute x%.2g + these collectives (spec::tp_collectives)\n",
                  o.tp, tp_link.link.latency_seconds * 1e6, tp_link.link.bandwidth_bytes_per_second / 1e9,
                  mib(tp_link.bytes), 1e6 * tp_link.all_gather_seconds, 1e6 * tp_link.reduce_scatter_seconds,
                  1e6 * spec::ring_collective_seconds(spec::Collective::all_gather, tp_link.bytes, o.tp,
                                                      tp_link.link.latency_seconds,
                                                      tp_link.link.bandwidth_bytes_per_second),
                  o.slowdown);
    }
  }

  // Every schedule's trainer first; then the measured steps round-robin over the schedules, so
  // a change in the machine's load (other programs) hits them all alike.
  struct Run {
    std::string name, recompute, offload;
    bool segment_row = false;  // of the row set over segment counts
    runtime::JobConfig job;
    runtime::PipelinePlan plan;
    std::unique_ptr<data::BatchSource> loader;
    std::unique_ptr<MemoryTracker> tracker;
    std::unique_ptr<runtime::DistributedTrainer> trainer;
    std::vector<double> makespans, bubbles, busy;  // busy: the ranks' mean compute time
    std::string packing;  // the document rows: "stream", "packed" or "wlb"; else ""
    std::vector<double> peaks;  // document rows: every rank's peak activations + K/V
  };
  // The rows: every schedule with every recompute variant, then the segment-count row set
  // (name, recompute, segments; 0 = --segments).
  struct Row {
    std::string name, recompute;
    int segments = 0;
    std::string offload = "none";
    std::string packing = "";  // the document rows' (Run::packing); "" for the others
  };
  std::vector<Row> rows;
  for (const std::string& offload : o.offload) {
    for (const std::string& variant : o.recompute) {
      for (const std::string& name : schedules) rows.push_back({name, variant, 0, offload});
    }
  }
  if (!o.segment_counts.empty()) {
    const schedule::ScheduleFamily* f = schedule::find_schedule_family(o.segment_family);
    if (f == nullptr || !f->sequence_level) {
      throw Error("--segment-family: expected a sequence-level schedule (seq1f1b, seq1f1b-i, seq-zb), found '" +
                  o.segment_family + "'");
    }
  }
  for (const std::string& k : comma_list(o.segment_counts)) {
    rows.push_back({o.segment_family, "none", static_cast<int>(positive_flag("--segment-counts", k, o.seq))});
  }
  // Packed documents over the same random tokens, cut where the distribution says.
  std::unique_ptr<data::TokenSpanSource> packed_source;
  std::unique_ptr<data::PackedSequences> packed;
  if (!o.documents.empty()) {
    const data::DocumentDistribution d = data::parse_document_distribution(o.documents, "--documents");
    const auto n = static_cast<std::int64_t>(data.tokens.size());
    packed_source = std::make_unique<data::TokenSpanSource>(data.tokens);
    packed = std::make_unique<data::PackedSequences>(data::distribution_starts(d, n - 1), n, o.seq);
    for (const char* packing : {"stream", "packed", "wlb"}) rows.push_back({o.segment_family, "none", 0, "none", packing});
    if (lead) {
      std::printf("documents: %s, %lld in %lld packed sequences of %d (%.1f%% padding); balanced rows: data.balance "
                  "wlb, windows of %d step(s)\n",
                  d.text().c_str(), static_cast<long long>(packed->document_count()),
                  static_cast<long long>(packed->size()), o.seq,
                  100.0 * static_cast<double>(packed->padding_tokens()) / (static_cast<double>(packed->size()) * o.seq),
                  o.balance_window);
    }
  }
  std::vector<Run> runs;
  bool recomputes = false;  // some run does: the profiles also time the layers' rebuild
  for (const Row& row : rows) {
    Run run;
    run.name = row.name;
    run.recompute = row.recompute;
    run.segment_row = row.segments > 0;
    run.job = bench_job(o, row.name, pp, row.segments, o.families.front(), o.precisions.front());
    // Data-parallel replicas: schedule::replicate runs replica q's micro-batches q m .. q m + m - 1
    // of the loader's dp x m (JobConfig::global_microbatches); every rank an emulated device.
    run.job.parallel.pp = stages;
    run.job.parallel.dp = o.dp;
    run.job.parallel.recompute = parse_recompute_flag("--recompute", row.recompute);
    run.offload = row.offload;
    apply_offload(o, run.job, pp, row.offload);
    recomputes = recomputes || run.job.parallel.recompute.any();
    run.packing = row.packing;
    if (!row.packing.empty()) {
      // Every document row runs the flops split; packed rows cut it per micro-batch.
      run.job.run.train.segments.split = spec::SplitMethod::flops;
      run.job.parallel.split = "flops";
      if (row.packing != "stream") run.job.run.data.packing = "documents";
    }
    run.plan = runtime::build_pipeline_plan(run.job, p);
    const runtime::TrainConfig t = run.job.global_train();
    if (row.packing.empty() || row.packing == "stream") {
      run.loader = std::make_unique<data::BatchLoader>(data.tokens, t.seq, t.microbatch_size, t.microbatches, 1);
    } else {
      run.loader = std::make_unique<data::SequentialLoader>(
          *packed_source, t.seq, t.microbatch_size, data::MicrobatchShares({t.microbatches}), data::DataPosition{},
          packed.get(), data::SequenceBalance{row.packing == "wlb" ? o.balance_window : 0});
    }
    run.tracker = std::make_unique<MemoryTracker>();
    run.trainer = std::make_unique<runtime::DistributedTrainer>(run.plan, t, world, *run.tracker);
    run.trainer->step(0, *run.loader);  // warm-up: caches, buffer pools
    runs.push_back(std::move(run));
  }
  // The unit profiles, one per sequence partition and number of micro-batches the schedule holds
  // at once (a unit is slower when its activations have left the caches: GPipe holds all m),
  // measured in every round before the round's steps (both ranks at once, as they run), so
  // profile and steps see the same machine load:
  // per unit the median over rounds of each round's median repeat. Or one profile from --profile.
  struct Profiles {
    std::size_t run;  // a run with this partition and in-flight count
    int in_flight;
    std::vector<runtime::SegmentProfile> typical;
  };
  std::vector<Profiles> profiles;
  std::vector<std::size_t> profile_of(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const int in_flight = peak_in_flight(runs[i].plan);
    const auto known = std::find_if(profiles.begin(), profiles.end(), [&](const Profiles& e) {
      return runs[e.run].plan.partition == runs[i].plan.partition && e.in_flight == in_flight;
    });
    profile_of[i] = static_cast<std::size_t>(known - profiles.begin());
    if (known == profiles.end()) profiles.push_back({i, in_flight, {}});
  }
  auto measure_profiles = [&] {
    for (Profiles& e : profiles) {
      e.typical.push_back(o.profile.empty()
                              ? measure_profile(world, runs[e.run].plan, o.repeats, e.in_flight, recomputes)
                              : runtime::read_segment_profile(o.profile));
    }
  };
  // Rounds: the profiles, then one step of every schedule.
  for (int s = 1; s <= o.steps; ++s) {
    if (s == 1 || o.profile.empty()) measure_profiles();
    for (Run& run : runs) {
      const runtime::MeasuredStep m = runtime::gather_step(world, run.trainer->step(s, *run.loader));
      run.makespans.push_back(m.makespan());
      run.bubbles.push_back(m.bubble_fraction());
      double busy = 0;
      for (double b : m.busy) busy += b / static_cast<double>(m.busy.size());
      run.busy.push_back(busy);
    }
  }
  // The document rows' peaks of activations + K/V on every rank (reset after the warm-up step: the
  // measured steps'), for the planned worst case below.
  for (Run& run : runs) {
    if (run.packing.empty()) continue;
    const double mine = static_cast<double>(run.tracker->peak(MemoryCategory::kActivations) +
                                            run.tracker->peak(MemoryCategory::kKVCache));
    for (const std::vector<double>& r : runtime::gather_all(world, std::vector<double>{mine})) run.peaks.push_back(r[0]);
  }
  if (!lead) return;

  std::printf("prediction: sim::simulate of the same schedule with per-unit costs from the engine's "
              "measured per-layer F/B/W times per segment%s (per unit the median over rounds of "
              "each round's median repeat)\n",
              o.profile.empty() ? "" : (" (" + o.profile + ")").c_str());
  for (const Profiles& e : profiles) {
    const runtime::SegmentProfile p = combine(e.typical);
    std::printf("  unit times, %d segment(s), %d micro-batch(es) in flight, ms F / B / W: layer",
                p.partition.count(), e.in_flight);
    for (const runtime::UnitTimes& u : p.layer) {
      std::printf(" %.2f/%.2f/%.2f", 1e3 * u.forward, 1e3 * u.backward_input, 1e3 * u.backward_weight);
      if (recomputes) std::printf(" (+%.2f rebuild)", 1e3 * u.recompute);
    }
    std::printf("; head");
    for (const runtime::UnitTimes& u : p.head) {
      std::printf(" %.2f/%.2f/%.2f", 1e3 * u.forward, 1e3 * u.backward_input, 1e3 * u.backward_weight);
    }
    std::printf("\n");
  }
  std::printf("%-12s %-9s %-7s %2s %2s | %10s %21s | %10s %7s | %7s %7s | %9s %9s | %s\n", "schedule", "recompute",
              "offload", "v", "k", "measured", "(fastest - slowest)", "simulated", "error", "bubble", "sim", "busy", "sim",
              "offload wait (sim) | copy compute (sim) at memcpy");
  // The document rows' predicted step of each round (round s runs step s), for the per-round lines,
  // and their measured and predicted idle shares averaged over the rounds (the bubble line).
  std::vector<std::vector<double>> predicted_rounds(runs.size());
  std::vector<double> predicted_bubble(runs.size(), 0.0);
  for (const Run& run : runs) {
    if (run.segment_row && (&run == runs.data() || !(&run - 1)->segment_row)) {
      std::printf("%s over segment counts (many short segments against few long ones):\n", run.name.c_str());
    }
    const Profiles& e = profiles[profile_of[static_cast<std::size_t>(&run - runs.data())]];
    const runtime::ProfileCostModel cost(combine(e.typical), run.plan, link, tp_link.link);
    const schedule::LoweredSchedule lowered = runtime::lower_plan(run.plan, INT32_MAX);
    // With activation offload the copies' bytes come from the exact unit table and take
    // bytes / --host-gbyte-per-s on each rank's copy engine (sim::ActivationOffloadModel).
    const sim::MemoryModel memory(run.plan.model, run.plan.vstage_layers, run.plan.partition, run.plan.microbatch_size,
                                  {run.plan.precision, run.job.parallel.recompute, 1});
    sim::SimOptions sim_options{false, false};
    sim::ActivationOffloadModel offloads = runtime::activation_offload_model(run.plan);
    sim_options.activation_offload = &offloads;
    // The CPU-only term: each rank's copies take core time from its compute at this machine's
    // memcpy cost per byte, measured here on the rank's own traffic (runtime/copy_profiler.h:
    // blocks of its mean moved unit over a span of the bytes it moves a step). The ranks share
    // this machine, so the lead measures for each.
    double copy_slowest = 0, copy_fastest = 0;  // the ranks' memcpy bytes per second
    if (run.offload != "none") {
      const sim::SimResult bytes = sim::simulate(run.plan.schedule, lowered, cost, &memory, sim_options);
      offloads.compute_seconds_per_byte.assign(bytes.ranks.size(), 0.0);
      for (std::size_t r = 0; r < bytes.ranks.size(); ++r) {
        const std::size_t units =
            schedule::activation_offloads(run.plan.schedule.ranks[r], offloads.chunk_offloads[r]).size();
        const double moved = bytes.ranks[r].offload_bytes;
        if (units == 0 || moved <= 0) continue;
        offloads.compute_seconds_per_byte[r] = runtime::measure_copy_seconds_per_byte(
            static_cast<std::size_t>(moved / static_cast<double>(units)), static_cast<std::size_t>(moved));
        const double rate = 1.0 / offloads.compute_seconds_per_byte[r];
        copy_slowest = copy_slowest > 0 ? std::min(copy_slowest, rate) : rate;
        copy_fastest = std::max(copy_fastest, rate);
      }
    }
    sim::SimResult typical = sim::simulate(run.plan.schedule, lowered, cost, &memory, sim_options);
    if (!run.packing.empty() && run.packing != "stream") {
      // Each measured step timed with its own micro-batches' documents (sim/document_cost_model.h),
      // the median kept as the measured one is.
      std::vector<sim::SimResult> steps;
      for (int s = 1; s <= o.steps; ++s) {
        steps.push_back(sim::simulate(run.plan.schedule, lowered,
                                      sim::DocumentCostModel(cost, run.plan.model, run.plan.partition,
                                                             run.plan.microbatch_size, document_step(run.plan, *run.loader, s).units),
                                      &memory, sim_options));
        predicted_rounds[static_cast<std::size_t>(&run - runs.data())].push_back(steps.back().step_time);
        predicted_bubble[static_cast<std::size_t>(&run - runs.data())] += steps.back().bubble_fraction / o.steps;
      }
      std::sort(steps.begin(), steps.end(), [](const sim::SimResult& a, const sim::SimResult& b) {
        return a.step_time < b.step_time;
      });
      typical = steps[steps.size() / 2];
    } else if (run.packing == "stream") {
      // Every step of stream windows is the same work: one prediction for every round.
      predicted_rounds[static_cast<std::size_t>(&run - runs.data())].assign(static_cast<std::size_t>(o.steps),
                                                                             typical.step_time);
      predicted_bubble[static_cast<std::size_t>(&run - runs.data())] = typical.bubble_fraction;
    }
    double offload_wait = 0, offload_compute = 0;
    for (const sim::RankResult& r : typical.ranks) {
      offload_wait = std::max(offload_wait, r.offload_wait);
      offload_compute = std::max(offload_compute, r.offload_compute);
    }
    std::vector<double> sorted = run.makespans;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    const double bubble = round_mean(run.bubbles);
    std::vector<double> busy = run.busy;
    std::sort(busy.begin(), busy.end());
    double sim_busy = 0;
    for (const sim::RankResult& r : typical.ranks) sim_busy += r.busy / static_cast<double>(typical.ranks.size());
    std::printf("%-12s %-9s %-7s %2d %2d | %7.1f ms (%7.1f - %7.1f ms) | %7.1f ms %+6.1f%% | %6.1f%% %6.1f%% | %6.1f ms %6.1f ms | %.1f ms",
                run.name.c_str(), run.recompute.c_str(), run.offload == "none" ? "no" : "act",
                run.plan.schedule.layout.max_chunks(),
                run.plan.partition.count(),
                1e3 * median, 1e3 * sorted.front(), 1e3 * sorted.back(), 1e3 * typical.step_time,
                100 * (typical.step_time - median) / median, 100 * bubble,
                100 * typical.bubble_fraction, 1e3 * busy[busy.size() / 2], 1e3 * sim_busy, 1e3 * offload_wait);
    if (copy_fastest > 0) {
      std::printf(" | %.1f ms at %.2f-%.2f GB/s", 1e3 * offload_compute, copy_slowest / 1e9, copy_fastest / 1e9);
    }
    std::printf("\n");
  }
  bool document_rows = false;
  for (const Run& run : runs) {
    if (run.packing.empty()) continue;
    if (!document_rows) {
      std::printf("document rows (%s, k = %d flops split): max/mean of sum(doc^2) per micro-batch (mean over the "
                  "measured steps); peak activations + K/V of every rank, measured / planned for the worst cut of "
                  "the steps (runtime::worst_case_partition, predicted_memory)\n",
                  run.name.c_str(), run.plan.partition.count());
      document_rows = true;
    }
    double spread = 0, replica_spread = 0;
    for (int s = 1; s <= o.steps; ++s) {
      const sim::StepDocuments step = document_step(run.plan, *run.loader, s);
      spread += step.max_over_mean / o.steps;
      replica_spread += data::max_over_mean(sim::replica_attention(step, o.dp), 1) / o.steps;
    }
    const spec::SequencePartition worst = runtime::worst_case_partition(run.plan, *run.loader, 0, o.steps + 1);
    const std::vector<sim::CategoryPeaks> planned = runtime::predicted_memory(run.plan, 1, &worst);
    std::string lengths;
    for (std::int64_t l : worst.lengths) lengths += (lengths.empty() ? "" : "+") + std::to_string(l);
    std::printf("  %-7s max/mean %.3f", run.packing.c_str(), spread);
    if (o.dp > 1) std::printf(" (per replica %.3f)", replica_spread);
    std::printf(" | worst cut %s |", lengths.c_str());
    for (std::size_t r = 0; r < run.peaks.size(); ++r) {
      const double plan_bytes = planned[r].activations + planned[r].kv_cache;
      std::printf(" rank %zu %.2f / %.2f MiB%s", r, mib(run.peaks[r]), mib(plan_bytes),
                  run.peaks[r] <= plan_bytes ? "" : " (OVER)");
    }
    std::printf("\n");
    // Round by round (each round a step of its own documents; the rows of a round ran back to
    // back, so they compare under the same load): measured / predicted.
    std::printf("          rounds, ms measured / predicted:");
    const std::vector<double>& predicted = predicted_rounds[static_cast<std::size_t>(&run - runs.data())];
    for (std::size_t s = 0; s < run.makespans.size(); ++s) {
      std::printf(" %.0f/%.0f", 1e3 * run.makespans[s], 1e3 * predicted.at(s));
    }
    std::printf("\n");
  }
  // The bubble that balancing removes: the idle share of the ranks (mean over the rounds: the
  // pipeline's own bubble plus, with --dp, the wait of the replicas that finish first), packed in
  // plain order against balanced, measured and predicted step by step from the same documents.
  const auto document_run = [&](const char* packing) {
    const auto it = std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return r.packing == packing; });
    return it == runs.end() ? -1 : static_cast<int>(it - runs.begin());
  };
  if (const int plain = document_run("packed"), balanced = document_run("wlb"); plain >= 0 && balanced >= 0) {
    const double measured_plain = round_mean(runs[static_cast<std::size_t>(plain)].bubbles);
    const double measured_balanced = round_mean(runs[static_cast<std::size_t>(balanced)].bubbles);
    const double predicted_plain = predicted_bubble[static_cast<std::size_t>(plain)];
    const double predicted_balanced = predicted_bubble[static_cast<std::size_t>(balanced)];
    std::printf("the bubble that balancing removes (idle share of the ranks, mean over the rounds%s): measured %.1f%% "
                "plain -> %.1f%% balanced (%+.1f points), predicted %.1f%% -> %.1f%% (%+.1f points)\n",
                o.dp > 1 ? ", the replicas' waits included" : "", 100 * measured_plain, 100 * measured_balanced,
                100 * (measured_balanced - measured_plain), 100 * predicted_plain, 100 * predicted_balanced,
                100 * (predicted_balanced - predicted_plain));
  }
  std::printf("measured = median over rounds of the pipeline makespan (first compute start to last compute end over all ranks; the "
              "gradient all-reduce and optimizer step are not simulated; with --dp the slowest replica's pipeline); bubble = measured mean and "
              "simulated idle share; busy = the ranks' mean compute time (median over rounds) and simulated\n");
}

// Sharded data parallelism's time: 1F1B on one stage held by all p ranks (pp 1 x dp p) at levels
// 0-3 with and without offload; per option the median step (barrier to the end of the update,
// slowest rank) over the rounds against the simulator with the profiled units, the measured link
// and this machine's AdamW and copy rates (sim/data_parallel_timing.h: gathers, reductions,
// update, all-gathers), and the part after the pipeline (collectives and update) alike.
void run_shard_speed(comm::Communicator& world, const BenchRuntimeOptions& o) {
  omp_set_num_threads(1);
  const int p = world.size();
  const bool lead = world.rank() == 0;
  if (o.tp > 1 || o.dp > 1) {
    if (lead) std::printf("\n(sharded data parallelism rows: pp 1 x dp p only, not run with --tp or --dp)\n");
    return;
  }
  const RandomTokens data(1 << 20);
  const sim::LinkProfile link = measure_link(world, o);
  // This machine's update, copy, commit and collective rates at the stage's size, measured on
  // every rank at once (the collectives over the data-parallel group: here every rank), averaged.
  runtime::JobConfig probe = bench_job(o, o.shard_schedule, 1, 0, o.families.front(), o.precisions.front());
  probe.parallel.dp = p;
  const runtime::PipelinePlan probe_plan = runtime::build_pipeline_plan(probe, p);
  const std::size_t stage_elements =
      model::layout_size(model::parameter_layout(probe_plan.model, probe_plan.vstage_specs.front()));
  runtime::UpdateCosts costs = runtime::measure_update_costs(world, stage_elements);
  {
    const std::vector<double> mine = {costs.device_seconds_per_element, costs.copy_bytes_per_second,
                                      costs.commit_bytes_per_second, costs.all_reduce_seconds_per_byte,
                                      costs.reduce_scatter_seconds_per_byte, costs.all_gather_seconds_per_byte};
    const auto all = runtime::gather_all(world, mine);
    std::vector<double> mean(mine.size(), 0.0);
    for (const auto& r : all) {
      for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += r[i] / static_cast<double>(all.size());
    }
    costs = {mean[0], mean[0], mean[1], mean[2], mean[3], mean[4], mean[5]};
  }
  struct Run {
    int level;
    bool offload;
    std::unique_ptr<MeasuredTrainer> measured;  // after one warm-up step
    std::vector<double> steps, tails;
  };
  std::vector<Run> runs;
  for (int level = 0; level <= 3; ++level) {
    for (bool offload : {false, true}) {
      const runtime::JobConfig job = shard_job(o, p, level, offload, o.families.front(), o.precisions.front());
      runs.push_back({level, offload, std::make_unique<MeasuredTrainer>(world, job, data, 1), {}, {}});
    }
  }
  std::vector<runtime::SegmentProfile> profiles;
  for (int s = 1; s <= o.steps; ++s) {
    if (s == 1 || o.profile.empty()) {
      profiles.push_back(o.profile.empty() ? measure_profile(world, runs.front().measured->plan, o.repeats, 1, false)
                                           : runtime::read_segment_profile(o.profile));
    }
    for (Run& run : runs) {
      const runtime::MeasuredStep m = runtime::gather_step(world, run.measured->trainer->step(s, run.measured->loader));
      run.steps.push_back(m.step_seconds);
      run.tails.push_back(m.step_seconds - m.makespan());
    }
  }
  if (!lead) return;
  const double stage_bytes = 4.0 * static_cast<double>(stage_elements);
  std::printf("\nsharded data parallelism: %s, pp 1 x dp %d, %d rounds; measured here on the stage's %.1f MiB: AdamW "
              "%.2f ns per element, copies %.2f GB/s, commit %.2f GB/s, all-reduce %.1f ms, reduce-scatter %.1f ms, "
              "all-gather %.1f ms; step = barrier to the end of the update on the slowest rank (median over rounds), "
              "after = the step past the pipeline's last compute (collectives and update)\n",
              o.shard_schedule.c_str(), p, o.steps, mib(stage_bytes), 1e9 * costs.device_seconds_per_element, costs.copy_bytes_per_second / 1e9,
              costs.commit_bytes_per_second / 1e9, 1e3 * costs.all_reduce_seconds_per_byte * stage_bytes,
              1e3 * costs.reduce_scatter_seconds_per_byte * stage_bytes, 1e3 * costs.all_gather_seconds_per_byte * stage_bytes);
  std::printf("%-5s %-7s | %10s %21s | %10s %7s | %9s %9s\n", "level", "offload", "measured", "(fastest - slowest)",
              "simulated", "error", "after", "sim");
  const runtime::SegmentProfile profile = combine(profiles);
  for (const Run& run : runs) {
    const runtime::PipelinePlan& plan = run.measured->plan;
    const runtime::ProfileCostModel cost(profile, plan, link);
    const sim::DataParallelModel dp = runtime::data_parallel_model(plan, costs);
    sim::SimOptions options{false, false, nullptr, &dp};
    const sim::SimResult r = sim::simulate(plan.schedule, runtime::lower_plan(plan, INT32_MAX), cost, nullptr, options);
    std::vector<double> sorted = run.steps, tails = run.tails;
    std::sort(sorted.begin(), sorted.end());
    std::sort(tails.begin(), tails.end());
    const double median = sorted[sorted.size() / 2];
    std::printf("%-5d %-7s | %7.1f ms (%7.1f - %7.1f ms) | %7.1f ms %+6.1f%% | %6.2f ms %6.2f ms\n", run.level,
                run.offload ? "yes" : "no", 1e3 * median, 1e3 * sorted.front(), 1e3 * sorted.back(),
                1e3 * r.synchronized_step_time, 100 * (r.synchronized_step_time - median) / median,
                1e3 * tails[tails.size() / 2], 1e3 * (r.synchronized_step_time - r.step_time));
  }
}

void run_bench(const BenchRuntimeOptions& o, bool speed) {
  comm::MpiSession session;
  try {
    if (speed) {
      run_speed(session.world(), o);
      run_shard_speed(session.world(), o);
    } else {
      run_memory(session.world(), o);
      run_shard_memory(session.world(), o);
    }
  } catch (const std::exception& e) {
    comm::abort_job(e.what());
  }
}

void add_options(CLI::App* cmd, BenchRuntimeOptions& o) {
  cmd->add_option("--layers", o.layers, "Transformer layers")->capture_default_str();
  cmd->add_option("--hidden", o.hidden, "Hidden size")->capture_default_str();
  cmd->add_option("--heads", o.heads, "Attention heads")->capture_default_str();
  cmd->add_option("--seq", o.seq, "Sequence length")->capture_default_str();
  cmd->add_option("--microbatch-size", o.microbatch_size, "Sequences per micro-batch")->capture_default_str();
  cmd->add_option("--microbatches", o.microbatches, "Micro-batches per step m")->capture_default_str();
  cmd->add_option("--segments", o.segments, "Segments k of the sequence-level schedules")->capture_default_str();
  cmd->add_option("--split", o.split, "Segment lengths: even or flops")
      ->check(CLI::IsMember({"even", "flops"}))
      ->capture_default_str();
  cmd->add_option("--chunks", o.chunks, "Chunks v of interleaved and seq1f1b-i")->capture_default_str();
  cmd->add_option("--steps", o.steps, "Measured steps (after one warm-up step)")->capture_default_str();
  cmd->add_option("--schedules", o.schedules, "Comma-separated schedule families (default: see above)");
  cmd->add_option("--recompute", o.recompute,
                  "parallel.recompute values to run each schedule with: none, full, N or n0,n1,...")
      ->expected(1, 16)
      ->capture_default_str();
  cmd->add_option("--shard-schedule", o.shard_schedule, "Family of the sharding rows (pp 1 x dp p)")->capture_default_str();
  cmd->add_option("--families", o.families,
                  "Model families: gpt2 (tied head, learned positions) and/or llama (GQA, SwiGLU,\n"
                  "untied head) of the same depth and width (speed: the first one)")
      ->check(CLI::IsMember({"gpt2", "llama"}))
      ->expected(1, 2)
      ->capture_default_str();
  cmd->add_option("--precisions", o.precisions, "Engine precisions: fp32 and/or bf16 (speed: the first one)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->expected(1, 2)
      ->capture_default_str();
  cmd->add_option("--grad-reduce", o.grad_reduce,
                  "train.grad_reduce of the bf16 rows: fp32 or bf16 gradients on the data-parallel wire")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--offload", o.offload,
                  "parallel.offload levels to run each schedule row with: none and/or activations (every\n"
                  "stage's saved activations to the host tier between F and B)")
      ->check(CLI::IsMember({"none", "activations"}))
      ->expected(1, 2)
      ->capture_default_str();
  cmd->add_option("--tp", o.tp,
                  "parallel.tp of every row: the job's ranks are p / tp pipeline ranks of tp consecutive\n"
                  "ranks each (tensor parallelism with sequence parallelism)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--slowdown", o.slowdown,
                  "Every device emulated this many times slower than a core (sleep-padded actions)")
      ->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--host-gbyte-per-s", o.host_gbyte_per_s,
                  "The host link the copy engine paces activation offload to (GB/s)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  cmd->add_option("--documents", o.documents,
                  "speed: three more rows of --segment-family (flops split) on packed documents of this length\n"
                  "distribution, lognormal:MEDIAN:SIGMA[:SEED] or histogram:PATH: stream windows, packed in plain order, packed and\n"
                  "balanced (data.balance wlb), predicted from each step's documents")
      ->type_name("DIST");
  cmd->add_option("--balance-window", o.balance_window, "speed: the balanced row's data.balance_window (steps)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
}

void register_bench_runtime(CLI::App& app) {
  CLI::App* bench = command_group(app, "bench", "Benchmarks that print figures");
  auto* runtime_cmd = bench->add_subcommand(
      "runtime", "The distributed runtime against the simulator (run under mpirun)");
  runtime_cmd->require_subcommand(1);
  auto mem = std::make_shared<BenchRuntimeOptions>();
  auto* memory = runtime_cmd->add_subcommand(
      "memory",
      "Measured peak activation + K/V bytes per stage against the simulator's prediction\n"
      "(default schedules gpipe, 1f1b, seq1f1b, zb-h1; `mpirun -np 4 plait bench runtime memory`)");
  add_options(memory, *mem);
  memory->callback([mem] { run_bench(*mem, false); });

  auto speed_options = std::make_shared<BenchRuntimeOptions>();
  speed_options->hidden = 128;
  speed_options->seq = 256;
  speed_options->microbatch_size = 2;
  speed_options->steps = 5;
  speed_options->segment_counts = "1,2,4,8,16";
  auto* speed = runtime_cmd->add_subcommand(
      "speed",
      "Measured step time of every schedule against the simulator fed with the engine's measured\n"
      "per-layer times (`mpirun -np 2 plait bench runtime speed`; one thread per rank)");
  add_options(speed, *speed_options);
  speed->add_option("--repeats", speed_options->repeats, "Runs per profiled unit (median kept)")
      ->capture_default_str();
  speed->add_option("--segment-counts", speed_options->segment_counts,
                    "Also run --segment-family at each of these segment counts, e.g. 1,2,4,8,16")
      ->capture_default_str();
  speed->add_option("--segment-family", speed_options->segment_family,
                    "The sequence-level family of the --segment-counts rows")
      ->capture_default_str();
  speed->add_option("--dp", speed_options->dp,
                    "Data-parallel replicas of every row (pp = p / dp; each replica m micro-batches, the\n"
                    "document rows' loader reading dp x m a step and balancing them all)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  speed->add_option("--profile", speed_options->profile,
                    "Segment profile written by plait profile (instead of measuring here)")
      ->type_name("FILE");
  speed->callback([speed_options] { run_bench(*speed_options, true); });
}

const CommandRegistration kRegistration(220, register_bench_runtime);

}  // namespace
}  // namespace plait::cli
