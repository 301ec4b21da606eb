// `plait train`: train a GPT on a text corpus with pipeline and data parallelism over MPI ranks
// (docs/runtime.md). `mpirun -np N plait train --config FILE` runs the layout and schedule of the
// config's "parallel" section (or the layout flags); without mpirun it is a job of one rank.
// Without --config it trains the built-in small default (configs/default.json) in one process.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "plait/cli/byte_size.h"
#include "plait/cli/commands.h"
#include "plait/cli/parallel_flags.h"
#include "plait/cli/progress_bar.h"
#include "plait/cli/rank_memory_table.h"
#include "plait/comm/abort_job.h"
#include "plait/comm/mpi_session.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/data/batch_loader.h"
#include "plait/data/byte_tokenizer.h"
#include "plait/data/text_corpus.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/measured_step.h"
#include "plait/runtime/memory_reports.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/trace/chrome_trace.h"
#include "plait/trace/html_timeline.h"

namespace plait::cli {
namespace {

struct TrainArgs {
  std::string config;
  int steps = 0;
  int threads = 0;
  std::string memory_limit;
  ParallelFlags layout;
  std::string recv_lookahead = std::to_string(runtime::kDefaultRecvLookahead);
  std::string trace, html;
  int trace_step = -1;
  std::string inject_failure;
};

std::int32_t parse_lookahead(const std::string& text) {
  if (text == "all") return INT32_MAX;
  try {
    std::size_t pos = 0;
    const long v = std::stol(text, &pos);
    if (pos == text.size() && v >= 0 && v < INT32_MAX) return static_cast<std::int32_t>(v);
  } catch (...) {
  }
  throw Error("--recv-lookahead: expected a number of compute actions >= 0 or 'all', found '" +
              text + "'");
}

// "R:S" or "R:S:kill" (tests only).
runtime::FailureInjection parse_failure(const std::string& text) {
  runtime::FailureInjection f;
  if (text.empty()) return f;
  int rank = -1;
  long long step = -1;
  char how[8] = {0};
  const int n = std::sscanf(text.c_str(), "%d:%lld:%7s", &rank, &step, how);
  if (n < 2 || rank < 0 || step < 0 || (n == 3 && std::string(how) != "kill")) {
    throw Error("--inject-failure: expected RANK:STEP or RANK:STEP:kill, found '" + text + "'");
  }
  f.rank = rank;
  f.step = step;
  f.kill = n == 3;
  return f;
}

std::string join(const std::vector<int>& values, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? sep : "") + std::to_string(values[i]);
  return out;
}

void print_header(const TrainArgs& args, const runtime::JobConfig& job,
                  const runtime::PipelinePlan& plan, const runtime::TrainConfig& t,
                  std::int32_t lookahead) {
  const model::GPTConfig& m = job.run.model;
  std::printf("plait train: config %s\n", args.config.empty()
                                              ? "built-in default (the same as configs/default.json)"
                                              : args.config.c_str());
  std::printf("  model: %d layers, hidden %d, %d heads, vocab %d, max_seq %d, %s embeddings: %.2fM "
              "parameters\n",
              m.layers, m.hidden, m.heads, m.vocab, m.max_seq, m.tie_embeddings ? "tied" : "untied",
              m.parameter_count() / 1e6);
  std::printf("  train: %d steps of %d x %d sequences of %d tokens (%lld tokens/step), %zu "
              "segment(s), lr %.2e -> %.2e (warm-up %d), AdamW wd %.2f, clip %.2f, %d threads/rank\n",
              t.steps, t.microbatches, t.microbatch_size, t.seq,
              static_cast<long long>(t.tokens_per_step()), t.segments().size(), t.lr, t.min_lr,
              t.warmup_steps, t.weight_decay, t.grad_clip, omp_get_max_threads());
  std::vector<int> lengths;
  for (const model::Segment& s : plan.segments) lengths.push_back(s.length);
  std::printf("  parallel: %s on %d rank(s), %d virtual stage(s) of %s layers, segments %s, "
              "receives posted %s\n",
              plan.schedule_name.c_str(), plan.num_ranks(), plan.num_vstages(),
              join(plan.vstage_layers, "/").c_str(), join(lengths, "+").c_str(),
              lookahead == INT32_MAX ? "a whole step ahead"
                                     : (std::to_string(lookahead) + " action(s) ahead").c_str());
  for (int r = 0; r < plan.num_ranks(); ++r) {
    std::printf("    %s: %zu actions\n", plan.rank_label(r).c_str(), plan.schedule.ranks[r].size());
  }
}

void write_timelines(const TrainArgs& args, const runtime::PipelinePlan& plan,
                     const runtime::MeasuredStep& step, int step_index) {
  if (args.trace.empty() && args.html.empty()) return;
  char buf[128];
  std::vector<std::pair<std::string, std::string>> summary;
  std::snprintf(buf, sizeof buf, "%.4f s (pipeline), %.4f s (whole step)", step.makespan(), step.step_seconds);
  summary.emplace_back("step time (measured)", buf);
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * step.bubble_fraction());
  summary.emplace_back("bubble", buf);
  summary.emplace_back("step", std::to_string(step_index));
  const trace::Timeline tl = runtime::measured_timeline(
      plan, step,
      "plait train: " + plan.schedule_name + ", " + std::to_string(plan.num_ranks()) +
          " ranks, m=" + std::to_string(plan.global_microbatches()) +
          ", k=" + std::to_string(plan.segments.size()) + ", seq " + std::to_string(plan.seq) +
          " (measured, step " + std::to_string(step_index) + ")",
      std::move(summary));
  if (!args.trace.empty()) {
    trace::write_chrome_trace_file(tl, args.trace);
    std::printf("wrote %s (Chrome trace events of step %d; open in https://ui.perfetto.dev)\n",
                args.trace.c_str(), step_index);
  }
  if (!args.html.empty()) {
    trace::write_html_timeline_file(tl, args.html);
    std::printf("wrote %s (HTML timeline of step %d)\n", args.html.c_str(), step_index);
  }
}

void train_ranks(comm::MpiSession& session, const runtime::JobConfig& job, const TrainArgs& args) {
  comm::Communicator& world = session.world();
  const int rank = world.rank();
  const bool lead = rank == 0;
  const std::int32_t lookahead = parse_lookahead(args.recv_lookahead);
  runtime::PipelinePlan plan;
  try {
    plan = runtime::build_pipeline_plan(job, world.size());
  } catch (const Error&) {
    // Every rank finds the same problem; let rank 0 report it alone (its abort ends the others).
    if (!lead) std::this_thread::sleep_for(std::chrono::seconds(3));
    throw;
  }
  const runtime::TrainConfig t = job.global_train();
  if (lead) print_header(args, job, plan, t, lookahead);

  const data::TextCorpus corpus = data::read_text_corpus(job.run.data.paths);
  const std::vector<std::uint16_t> tokens = data::ByteTokenizer::encode(corpus.text);
  if (lead) {
    std::printf("  data: %zu file(s) under %s%s, %zu tokens (byte-level)\n", corpus.files.size(),
                job.run.data.paths.front().c_str(), job.run.data.paths.size() > 1 ? " ..." : "",
                tokens.size());
  }
  const data::BatchLoader batches(tokens, t.seq, t.microbatch_size, t.microbatches, t.seed);
  std::fflush(stdout);  // the header before the progress lines on stderr

  std::optional<std::size_t> capacity;
  if (!args.memory_limit.empty()) capacity = parse_byte_size("--memory-limit", args.memory_limit);
  MemoryTracker tracker(capacity);
  runtime::TrainerOptions options;
  options.recv_lookahead = lookahead;
  options.failure = parse_failure(args.inject_failure);
  runtime::DistributedTrainer trainer(plan, t, world, tracker, options);

  const bool timeline = !args.trace.empty() || !args.html.empty();
  const int trace_step = std::clamp(args.trace_step >= 0 ? args.trace_step : t.steps - 1, 0, t.steps - 1);
  std::unique_ptr<ProgressBar> progress;
  if (lead) progress = std::make_unique<ProgressBar>(t.steps, t.tokens_per_step());
  const double start = monotonic_seconds();
  double first_loss = 0, last_loss = 0, bubble_sum = 0, makespan_sum = 0, step_sum = 0;
  int measured_steps = 0;
  constexpr int kAverage = 10;  // report the loss averaged over the first and last 10 steps
  const int window = std::min(kAverage, t.steps);
  runtime::MeasuredStep traced;
  for (int step = 0; step < t.steps; ++step) {
    trainer.set_record_events(timeline && step == trace_step);
    const runtime::DistributedStepResult r = trainer.step(step, batches);
    const runtime::MeasuredStep measured = runtime::gather_step(world, r);
    // The first step warms caches and the buffer pools; time the rest (unless it is the only one).
    if (step > 0 || t.steps == 1) {
      bubble_sum += measured.bubble_fraction();
      makespan_sum += measured.makespan();
      step_sum += measured.step_seconds;
      ++measured_steps;
    }
    if (timeline && step == trace_step) traced = measured;
    if (step < window) first_loss += r.loss / window;
    if (step >= t.steps - window) last_loss += r.loss / window;
    if (lead) progress->update(step, r.loss, r.lr);
  }
  const double secs = monotonic_seconds() - start;
  const std::vector<MemoryReport> memory = runtime::gather_memory_reports(world, tracker.report());
  if (!lead) return;
  progress->finish();
  std::printf("done: %d steps in %.1f s, %.0f tokens/s; loss (mean of %d steps) %.4f at the start "
              "-> %.4f at the end\n",
              t.steps, secs, t.steps * static_cast<double>(t.tokens_per_step()) / secs, window,
              first_loss, last_loss);
  std::printf("pipeline (measured, mean of %d step(s)%s): step %.4f s, pipeline makespan %.4f s, "
              "bubble %.2f%% (1 - busy / (ranks x makespan))\n",
              measured_steps, t.steps > 1 ? " after the first" : "", step_sum / measured_steps,
              makespan_sum / measured_steps, 100 * bubble_sum / measured_steps);
  print_rank_memory_table(stdout, plan, memory);
  write_timelines(args, plan, traced, trace_step);
}

void run_train(const TrainArgs& args) {
  if (args.threads > 0) omp_set_num_threads(args.threads);
  // The configuration is read before MPI starts, so a bad file is one line from each process.
  runtime::JobConfig job = args.config.empty()
                               ? runtime::job_from_run_config(runtime::default_run_config())
                               : runtime::load_job_config(args.config);
  if (args.steps > 0) {
    job.run.train.steps = args.steps;
    job.run.train.warmup_steps = std::min(job.run.train.warmup_steps, args.steps);
  }
  apply_parallel_flags(args.layout, job);
  std::exception_ptr failure;
  {
    comm::MpiSession session;
    try {
      train_ranks(session, job, args);
    } catch (const std::exception& e) {
      // With several ranks, stop them all at once naming this rank (docs/comm.md); a job of one
      // rank finalizes MPI normally and reports the error like any other command.
      if (session.size() > 1) comm::abort_job(e.what());
      failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train",
      "Train a GPT on a text corpus (byte-level tokens, AdamW, warm-up + cosine learning rate,\n"
      "gradient clipping) with pipeline and data parallelism: `mpirun -np N plait train --config\n"
      "FILE` runs the layout and schedule of the config's \"parallel\" section (docs/runtime.md);\n"
      "without mpirun it is one rank. Without --config: a small built-in default that runs in a\n"
      "couple of minutes on 2 cores (configs/default.json).");
  auto args = std::make_shared<TrainArgs>();
  cmd->add_option("--config", args->config,
                  "JSON file with sections model, train, data and parallel (docs/config.md)")
      ->type_name("FILE");
  cmd->add_option("--steps", args->steps, "Override train.steps (for a quick look)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", args->threads,
                  "OpenMP/OpenBLAS threads per rank (default: OMP_NUM_THREADS or all cores; use 1\n"
                  "when the ranks share a machine's cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory-limit", args->memory_limit,
                  "Memory capacity of every rank's accounting (e.g. 512MiB, 2GiB): exceeding it is\n"
                  "an out-of-memory error naming the category, as on a device of that size\n"
                  "(parallel.devices[r].memory_bytes sets one rank's)")
      ->type_name("SIZE");
  add_parallel_flags(cmd, args->layout);
  cmd->add_option("--recv-lookahead", args->recv_lookahead,
                  "Post each receive this many compute actions before the action that needs it,\n"
                  "or 'all' (a whole step's receives at its start). Sends never block, so any\n"
                  "value is deadlock-free; larger values hold more comm_buffers memory")
      ->type_name("N|all")
      ->capture_default_str();
  cmd->add_option("--trace", args->trace,
                  "Write the measured per-rank timeline of one step as Chrome trace events (the\n"
                  "format of plait sim --trace)")
      ->type_name("FILE");
  cmd->add_option("--html", args->html,
                  "Write the measured timeline of that step as a self-contained HTML page (the\n"
                  "format of plait sim --html)")
      ->type_name("FILE");
  cmd->add_option("--trace-step", args->trace_step,
                  "Which step --trace/--html record, counting from 0 (default: the last)")
      ->check(CLI::NonNegativeNumber);
  // Failure tests only: fail rank R mid-way through step S (throw, or SIGKILL with ':kill').
  cmd->add_option("--inject-failure", args->inject_failure)->group("");
  cmd->callback([args] { run_train(*args); });
}

const CommandRegistration kRegistration(10, register_train);

}  // namespace
}  // namespace plait::cli
