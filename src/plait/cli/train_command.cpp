// `plait train`: train a GPT on a text corpus or token shards with pipeline and data
// parallelism over MPI ranks (docs/runtime.md), with validation, checkpoints and --resume
// (docs/checkpoints.md). `mpirun -np N plait train --config FILE` runs the layout and schedule of
// the config's "parallel" section (or the layout flags); without mpirun it is a job of one rank.
// Without --config it trains the built-in small default (configs/default.json) in one process.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "plait/cli/byte_size.h"
#include "plait/cli/commands.h"
#include "plait/cli/flag_values.h"
#include "plait/cli/gpt2_vocab_dir.h"
#include "plait/cli/output_path.h"
#include "plait/cli/parallel_flags.h"
#include "plait/cli/progress_bar.h"
#include "plait/cli/rank_memory_table.h"
#include "plait/comm/abort_job.h"
#include "plait/comm/mpi_session.h"
#include "plait/core/append_file.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"
#include "plait/core/printable_text.h"
#include "plait/core/stop_signals.h"
#include "plait/data/gpt2_tokenizer.h"
#include "plait/model/parameter_layout.h"
#include "plait/runtime/collective_error.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/failure_injection.h"
#include "plait/runtime/measured_step.h"
#include "plait/runtime/memory_reports.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/training_resume.h"
#include "plait/runtime/training_metrics.h"
#include "plait/runtime/training_run.h"
#include "plait/trace/chrome_trace.h"
#include "plait/trace/html_timeline.h"

namespace plait::cli {
namespace {

namespace fs = std::filesystem;

// The flags as given; numbers are checked by parse_numbers (flag_values.h, as plait sim does).
struct TrainArgs {
  std::string config;
  std::string steps_text, threads_text, trace_step_text, stop_at_text;
  std::string memory_limit;
  std::string precision;  // --precision: overrides train.precision
  std::string grad_reduce;  // --grad-reduce: overrides train.grad_reduce
  ParallelFlags layout;
  std::string recv_lookahead = std::to_string(runtime::kDefaultRecvLookahead);
  std::string trace, html;
  std::optional<std::string> resume;  // set when --resume was given ("" without DIR)
  std::string resume_dir;
  std::string metrics;
  std::string inject_failure;
  bool allow_recipe_change = false;

  int steps = 0, threads = 0, trace_step = -1;  // 0 / -1: not given
  long long stop_at = 0;
  std::optional<std::size_t> capacity;
  void parse_numbers() {
    if (!memory_limit.empty()) capacity = parse_byte_size("--memory-limit", memory_limit);
    const auto given = [](const std::string& text, auto parse) { return text.empty() ? 0 : parse(text); };
    steps = static_cast<int>(given(steps_text, [](const std::string& t) { return positive_flag("--steps", t, 1 << 30); }));
    threads = static_cast<int>(given(threads_text, [](const std::string& t) { return positive_flag("--threads", t, 4096); }));
    stop_at = given(stop_at_text, [](const std::string& t) { return positive_flag("--stop-at", t, 1 << 30); });
    if (!trace_step_text.empty()) trace_step = static_cast<int>(integer_flag("--trace-step", trace_step_text, 0, 1 << 30));
  }
};

// Threads per rank and why: --threads; else OMP_NUM_THREADS; else, under an MPI launcher, the
// machine's hardware threads shared among the ranks on this node (at most the cores this rank
// may run on); else every core this process may use.
struct ThreadChoice {
  int threads = 1;
  std::string why;
};

ThreadChoice choose_threads(int flag) {
  if (flag > 0) return {flag, "--threads"};
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    return {omp_get_max_threads(), "OMP_NUM_THREADS"};
  }
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int local = 0;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* env = std::getenv(var); env && std::atoi(env) > 0) {
      local = std::atoi(env);
      break;
    }
  }
  if (local > 0) {
    const int share = std::max(1, std::min(omp_get_num_procs(), hardware / local));
    return {share, std::to_string(hardware) + " hardware threads / " + std::to_string(local) +
                       " ranks on this node"};
  }
  return {std::max(1, omp_get_num_procs()), "all cores"};
}

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

template <typename T>
std::string join(const std::vector<T>& values, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? sep : "") + std::to_string(values[i]);
  return out;
}

// Where the header's micro-batch count comes from: train.microbatches counts per replica in the
// generated parallel form and the whole step in the explicit one (docs/config.md), and the header
// prints the global count, so it says which.
std::string microbatches_source(const runtime::JobConfig& job) {
  const int m = job.run.train.microbatches;
  if (job.parallel.form == runtime::ParallelConfig::Form::explicit_layout) {
    return "train.microbatches " + std::to_string(m) + ", the global count in the explicit parallel form";
  }
  return "train.microbatches " + std::to_string(m) + " per replica x dp " + std::to_string(job.parallel.dp);
}

// "ZeRO level 0/2 on the virtual stages (parallel.shard), AdamW moments and master weights
// offloaded to the host tier on virtual stage(s) 1 (parallel.offload)", or "" when nothing is
// sharded or offloaded: the memory tables show the effect, this line the cause.
std::string describe_sharding(const runtime::ParallelConfig& p, int vstages) {
  std::vector<int> levels, offloaded;
  for (int v = 0; v < vstages; ++v) {
    levels.push_back(p.shard_level(v));
    if (p.offloaded(v)) offloaded.push_back(v);
  }
  const bool sharded = std::any_of(levels.begin(), levels.end(), [](int l) { return l > 0; });
  if (!sharded && offloaded.empty()) return "";
  const bool uniform = std::all_of(levels.begin(), levels.end(), [&](int l) { return l == levels[0]; });
  std::string s = "ZeRO level " + (uniform ? std::to_string(levels[0]) + " on every virtual stage"
                                           : join(levels, "/") + " on the virtual stages") +
                  " (parallel.shard)";
  if (sharded && p.shard_shares == runtime::ParallelConfig::Shares::memory) {
    s += ", shards proportional to memory_bytes";
  }
  s += offloaded.empty() ? ", nothing offloaded"
       : static_cast<int>(offloaded.size()) == vstages
           ? ", AdamW moments and master weights offloaded to the host tier on every virtual stage (parallel.offload)"
           : ", AdamW moments and master weights offloaded to the host tier on virtual stage(s) " + join(offloaded, ", ") +
                 " (parallel.offload)";
  return s;
}

void print_header(const TrainArgs& args, const runtime::JobConfig& job,
                  const runtime::PipelinePlan& plan, const runtime::TrainConfig& t,
                  std::int32_t lookahead, const ThreadChoice& threads) {
  const spec::ModelSpec& m = job.run.model;
  const std::string source = !args.config.empty() ? args.config
                             : args.resume        ? job.run.source + ", the checkpoint's own"
                                                  : "built-in default (the same as configs/default.json)";
  std::printf("plait train: config %s\n", source.c_str());
  // spec::describe names an untied head; a tied one is said here.
  std::printf("  model: %s%s, max_seq %lld: %.2fM parameters\n", spec::describe(m).c_str(),
              m.tie_embeddings ? ", LM head tied to the token embedding" : "",
              static_cast<long long>(m.max_seq), static_cast<double>(m.parameter_count()) / 1e6);
  std::printf("  train: %d steps of %d micro-batch(es) x %d sequences of %d tokens (%lld "
              "tokens/step; %s), %d segment(s), lr %.2e -> %.2e (warm-up %d), AdamW wd %.2f, "
              "clip %.2f, non-finite steps: %s\n",
              t.steps, t.microbatches, t.microbatch_size, t.seq,
              static_cast<long long>(t.tokens_per_step()), microbatches_source(job).c_str(),
              t.segments.segments(), t.lr, t.min_lr, t.warmup_steps, t.weight_decay, t.grad_clip,
              runtime::to_string(t.on_nonfinite));
  std::printf("  threads: %d per rank (%s)\n", omp_get_max_threads(), threads.why.c_str());
  if (t.precision == spec::Precision::bf16) {
    std::printf("  precision: bf16 mixed precision: bf16 activations, K/V, stage messages and compute "
                "weights; fp32 master weights, gradients, AdamW state, statistics and loss; data "
                "parallelism reduces %s gradients\n",
                spec::grad_reduce_name(t.grad_reduce));
  } else {
    std::printf("  precision: fp32\n");
  }
  const std::vector<std::int64_t>& lengths = plan.partition.lengths;
  std::string tp;
  if (plan.any_tensor_parallel()) {
    std::string degrees;
    for (int v = 0; v < plan.num_vstages(); ++v) {
      degrees += (v ? "/" : "") + std::to_string(plan.vstage_specs[static_cast<std::size_t>(v)].tensor_parallel);
    }
    tp = plan.uniform_tensor_parallel()
             ? " x tensor parallelism " + std::to_string(plan.max_tensor_parallel()) + " = " +
                   std::to_string(plan.world_size()) + " ranks (TP innermost: ranks " +
                   std::to_string(plan.max_tensor_parallel()) + "s + i, sequence-parallel norms)"
             : ", tensor parallelism " + degrees + " per virtual stage = " + std::to_string(plan.world_size()) +
                   " ranks (TP innermost: each rank's group consecutive, sequence-parallel norms; boundary "
                   "messages resharded between degrees)";
  }
  std::printf("  parallel: %s on %d rank(s)%s, %d virtual stage(s) of %s layers, segments %s, "
              "receives posted %s\n",
              plan.schedule_name.c_str(), plan.num_ranks(), tp.c_str(), plan.num_vstages(),
              join(plan.vstage_layers, "/").c_str(),
              (join(lengths, "+") + (plan.document_cuts ? " (nominal; each micro-batch cut from its documents)" : ""))
                  .c_str(),
              lookahead == INT32_MAX ? "a whole step ahead"
                                     : (std::to_string(lookahead) + " action(s) ahead").c_str());
  if (job.parallel.recompute.any()) {
    std::vector<int> counts;
    for (const model::StageSpec& s : plan.vstage_specs) counts.push_back(s.recompute_layers);
    std::printf("  recompute: %s layers of the virtual stages' %s recompute their forward in B "
                "(parallel.recompute: %s)\n",
                join(counts, "/").c_str(), join(plan.vstage_layers, "/").c_str(),
                job.parallel.recompute.describe().c_str());
  }
  if (const std::string sharding = describe_sharding(job.parallel, plan.num_vstages()); !sharding.empty()) {
    std::printf("  sharding: %s\n", sharding.c_str());
  }
  std::vector<int> moving;
  for (int v = 0; v < plan.num_vstages(); ++v) {
    if (plan.offloads_activations(v)) moving.push_back(v);
  }
  if (!moving.empty()) {
    // The cause of the host tier's activations in the memory tables (runtime/activation_offload.h).
    std::printf("  activation offload: virtual stage(s) %s move each unit's saved activations to the host tier "
                "between its F and its B (parallel.offload)\n",
                join(moving, ", ").c_str());
  }
  for (int r = 0; r < plan.num_ranks(); ++r) {
    std::printf("    %s: %zu actions\n", plan.rank_label(r).c_str(), plan.schedule.ranks[r].size());
  }
}

// `plan`: the plan the traced step ran (its schedule re-balanced, its layers moved: the trainer's
// then); `rebalances` and `moves`: the re-balances and layer moves decided before the step, each
// shown in the timeline's summary.
void write_timelines(const TrainArgs& args, const runtime::PipelinePlan& plan,
                     const runtime::MeasuredStep& step, int step_index,
                     const std::vector<runtime::ShareChange>& rebalances, const std::vector<runtime::LayerMove>& moves) {
  if (args.trace.empty() && args.html.empty()) return;
  char buf[128];
  std::vector<std::pair<std::string, std::string>> summary;
  for (const runtime::ShareChange& c : rebalances) {
    summary.emplace_back("re-balanced after step " + std::to_string(c.step), runtime::describe_shares(c));
  }
  for (const runtime::LayerMove& m : moves) {
    summary.emplace_back(std::string(m.made ? "moved layers" : "declined a layer move") + " after step " +
                             std::to_string(m.step),
                         runtime::describe(m));
  }
  std::snprintf(buf, sizeof buf, "%.4f s (pipeline), %.4f s (whole step)", step.makespan(), step.step_seconds);
  summary.emplace_back("step time (measured)", buf);
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * step.bubble_fraction());
  summary.emplace_back("bubble", buf);
  summary.emplace_back("step", std::to_string(step_index));
  const trace::Timeline tl = runtime::measured_timeline(
      plan, step,
      "plait train: " + plan.schedule_name + ", " + std::to_string(plan.num_ranks()) +
          " ranks, m=" + std::to_string(plan.global_microbatches()) +
          ", k=" + std::to_string(plan.partition.count()) + ", seq " + std::to_string(plan.seq) +
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

// "52.78T parameters, 192.00 TiB in fp32": what the rank's stages alone hold, for an allocation
// the machine refused.
std::string parameters_of_rank(const runtime::PipelinePlan& plan, int rank) {
  double n = 0;
  for (const int v : plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)]) {
    for (const model::NamedTensor& t : model::parameter_layout(plan.model, plan.vstage_specs[static_cast<std::size_t>(v)])) {
      n += static_cast<double>(t.numel);
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2fG parameters, ", n / 1e9);
  return buf + format_bytes(static_cast<std::size_t>(std::min(n * 4, 1.8e19))) + " in fp32";
}

// Errors every rank finds alike (a bad plan, data or checkpoint: the same files and values):
// rank 0 reports them alone; the others wait a little, which rank 0's abort cuts short (if only
// some rank found it, that rank still reports it after the wait).
// `Collective` is the error type found alike: any plait::Error while setting up (plan, data,
// checkpoint), only runtime::CollectiveError while training (a failure of one rank, such as an
// emulated device running out of memory, must stop the job at once).
template <typename Collective, typename F>
auto reported_by_lead(bool lead, F&& f) {
  try {
    return f();
  } catch (const Collective&) {
    if (!lead) std::this_thread::sleep_for(std::chrono::seconds(3));
    throw;
  }
}

bool same_directory(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

void print_run_setup(const runtime::TrainingRun& run, const runtime::JobConfig& job,
                     const TrainArgs& args) {
  std::printf("  data: %s\n", run.data().describe().c_str());
  if (run.data().validation()) {
    std::printf("  validation: %s\n", run.data().describe_validation().c_str());
  }
  if (job.run.checkpoint) {
    const runtime::CheckpointConfig& c = *job.run.checkpoint;
    std::string where;
    if (args.config.empty() && args.resume) {
      where = " (where the checkpoint resumed from lives)";
    } else if (!run.resumed_from().empty() && !same_directory(fs::path(run.resumed_from()).parent_path(), c.dir)) {
      // --resume DIR with a --config whose checkpoint.dir is elsewhere: saves follow the config.
      where = " (the config's checkpoint.dir; the checkpoint resumed from is in " +
              fs::path(run.resumed_from()).parent_path().string() + ")";
    }
    std::printf("  checkpoints: into %s%s, %s%s\n", c.dir.c_str(), where.c_str(),
                c.every > 0 ? ("every " + std::to_string(c.every) + " steps and after the last").c_str()
                            : "after the last step",
                c.keep_last > 0 ? (", keeping the newest " + std::to_string(c.keep_last)).c_str() : "");
  }
  if (const std::optional<runtime::StragglerConfig>& g = job.run.stragglers) {
    // (Shown when the config has the section; the defaults apply silently otherwise.)
    if (g->enabled) {
      const std::string& off = run.rebalance_unavailable();
      const std::string& fixed = run.move_unavailable();
      std::printf("  stragglers: flagged when %.2fx slower than their last %d steps and their peers for %d steps in a "
                  "row, cleared below %.2fx, then %d steps of cool-down; %s\n",
                  g->threshold, g->window, g->consecutive, g->clear_below, g->cooldown,
                  off.empty()     ? "a flagged rank hands micro-batches to its stage's data-parallel peers"
                  : fixed.empty() ? "a flagged rank alone on its stage moves layers to a neighbour when the move pays"
                                  : ("reported only, not re-balanced: " + off + "; " + fixed).c_str());
    } else {
      std::printf("  stragglers: not detected (stragglers.enabled false)\n");
    }
  }
  if (const std::string w = run.lock_warning(); !w.empty()) std::fprintf(stderr, "plait: warning: %s\n", w.c_str());
  for (const std::string& note : run.resume_notes()) std::printf("  resume: %s\n", note.c_str());
  if (!run.initialised_from().empty()) {
    std::printf("  init: parameters from %s (init.from; AdamW state from zero)\n", run.initialised_from().c_str());
  }
  if (!run.initial_checkpoint().empty()) {
    std::printf("  checkpoint: %s (step 0, the %s parameters: checkpoint.save_initial)\n",
                run.initial_checkpoint().c_str(), run.initialised_from().empty() ? "untrained" : "initial");
  }
  if (!run.resumed_from().empty()) {
    std::printf("  resumed from %s: step %lld\n", run.resumed_from().c_str(),
                static_cast<long long>(run.start_step()));
  } else if (args.resume) {
    std::printf("  resume: no complete checkpoint in %s yet; starting at step 0\n",
                args.resume->empty() && job.run.checkpoint ? job.run.checkpoint->dir.c_str()
                                                           : args.resume->c_str());
  }
  if (run.stop_step() < run.train().steps) {
    std::printf("  stopping before step %lld (--stop-at; train.steps %d sets the schedule)\n",
                static_cast<long long>(run.stop_step()), run.train().steps);
  }
}

// One JSON object per line: {"step", "loss", "grad_norm", "lr", "skipped"} per training step and
// {"step", "val_loss"} per validation. Doubles are written in their shortest round-trip form, so
// two runs can be compared bit for bit.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) {
    if (!path.empty()) out_ = std::make_unique<AppendFile>(path);  // never through a link
  }
  void write(const nlohmann::json& record) {
    if (out_) out_->write(record.dump() + "\n");
  }

 private:
  std::unique_ptr<AppendFile> out_;
};

// "1,3": the virtual stages a rank holds.
std::string rank_stages(const runtime::PipelinePlan& plan, std::size_t rank) {
  std::string stages;
  for (std::int32_t v : plan.schedule.layout.rank_vstages[rank]) stages += (stages.empty() ? "" : ",") + std::to_string(v);
  return stages;
}

// The --metrics record of a run's start (runtime/training_metrics.h).
nlohmann::json run_record(const TrainArgs& args, const runtime::JobConfig& job, const runtime::PipelinePlan& plan,
                          const runtime::TrainConfig& t, std::int64_t start_step) {
  std::vector<std::string> stages;
  for (int r = 0; r < plan.num_ranks(); ++r) stages.push_back(rank_stages(plan, static_cast<std::size_t>(r)));
  return {{"config", args.config.empty() ? job.run.source : args.config},
          {"model", spec::describe(job.run.model)},
          {"parameters", job.run.model.parameter_count()},
          {"ranks", plan.num_ranks()},
          {"schedule", plan.schedule_name},
          {"precision", std::string(spec::precision_name(t.precision))},
          {"grad_reduce", spec::grad_reduce_name(t.grad_reduce)},
          {"tokens_per_step", t.tokens_per_step()},
          {"start_step", start_step},
          {"stages", stages}};
}

// The --metrics record of a run's end: every rank's peak memory by category (and the host
// tier's, when any rank used it).
nlohmann::json memory_record(const runtime::PipelinePlan& plan, const std::vector<MemoryReport>& memory,
                             const std::vector<MemoryReport>& host) {
  // One entry per job rank; under TP its stages and device are its schedule rank's.
  const auto scheduled = [&](std::size_t r) { return static_cast<std::size_t>(plan.schedule_rank_of(static_cast<int>(r))); };
  nlohmann::json record = {{"memory", nlohmann::json::array()}};
  bool host_used = false;
  for (std::size_t r = 0; r < memory.size(); ++r) {
    record["memory"].push_back(runtime::rank_memory_json(static_cast<int>(r), rank_stages(plan, scheduled(r)), memory[r],
                                                         plan.devices[scheduled(r)].memory_bytes));
    host_used = host_used || host[r].peak_total > 0;
  }
  if (host_used) {
    record["host_memory"] = nlohmann::json::array();
    for (std::size_t r = 0; r < host.size(); ++r) {
      record["host_memory"].push_back(runtime::rank_memory_json(static_cast<int>(r), rank_stages(plan, scheduled(r)),
                                                                host[r], plan.devices[scheduled(r)].host_memory_bytes));
    }
  }
  return record;
}

// train.sample_every: the sample's text under the progress bar, line by line (bytes that are no
// printable UTF-8 escaped). GPT-2 tokens are decoded with the vocabulary at --vocab-dir's
// default place (scripts/fetch-gpt2-tokenizer.sh); without it, the ids are printed.
class SamplePrinter {
 public:
  explicit SamplePrinter(std::string tokenizer) : tokenizer_(std::move(tokenizer)) {}
  // Prints the sample; returns its printable lines joined by newlines (for --metrics).
  std::string print(ProgressBar& progress, int step, const std::vector<std::int32_t>& tokens) {
    std::string text;
    if (tokenizer_ == "byte") {
      for (std::int32_t t : tokens) text += t >= 0 && t < 256 ? static_cast<char>(t) : '?';
    } else if (gpt2()) {
      std::vector<std::uint16_t> ids;
      for (std::int32_t t : tokens) {
        if (t >= 0 && t < gpt2_->vocab_size()) ids.push_back(static_cast<std::uint16_t>(t));
      }
      text = gpt2_->decode(ids);
    } else {
      text = "(token ids; no GPT-2 vocabulary at " + default_gpt2_vocab_dir() + ")";
      for (std::int32_t t : tokens) text += " " + std::to_string(t);
    }
    progress.note("  step " + std::to_string(step) + ": sample (" + std::to_string(tokens.size()) +
                  " tokens, train.sample_every):");
    std::string printed;
    std::size_t begin = 0;
    while (begin <= text.size()) {
      const std::size_t end = std::min(text.find('\n', begin), text.size());
      const std::string part = printable_text(std::string_view(text).substr(begin, end - begin), 400);
      progress.note("  | " + part);
      printed += (begin == 0 ? "" : "\n") + part;
      begin = end + 1;
    }
    return printed;
  }

 private:
  bool gpt2() {
    if (!tried_) {
      tried_ = true;
      try {
        gpt2_ = std::make_unique<data::Gpt2Tokenizer>(data::Gpt2Tokenizer::load(default_gpt2_vocab_dir()));
      } catch (const Error&) {
      }
    }
    return gpt2_ != nullptr;
  }
  std::string tokenizer_;
  bool tried_ = false;
  std::unique_ptr<data::Gpt2Tokenizer> gpt2_;
};

// What rank 0 says when a stop signal ends the run after `rec` (docs/checkpoints.md,
// "Preemption"): how many ranks were signalled (and with what, here), where every rank stopped,
// and the checkpoint with the save's duration.
std::string stop_note(const runtime::TrainingStep& rec, int ranks) {
  const int here = stop_signal();
  std::string line = "plait: a stop signal reached " + std::to_string(rec.stop_requests) + " of " +
                     std::to_string(ranks) + " rank(s)" +
                     (here != 0 ? std::string(" (") + stop_signal_name(here) + " on rank 0)" : std::string());
  if (!rec.stopped) return line + " during the last step: the run is complete";
  line += ": every rank stopped after step " + std::to_string(rec.step);
  if (rec.checkpoint.empty()) return line + " (no checkpoint section: nothing saved)";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f s", rec.save_seconds);
  return line + "; saved its checkpoint " + rec.checkpoint + " in " + seconds + " (a resume starts at step " +
         std::to_string(rec.step + 1) + ")";
}

// Returns whether a stop signal ended the run early (saved: the job exits kPreemptedExitStatus).
bool train_ranks(comm::MpiSession& session, const runtime::JobConfig& job, const TrainArgs& args,
                 const ThreadChoice& threads) {
  comm::Communicator& world = session.world();
  const int rank = world.rank();
  const bool lead = rank == 0;
  const std::int32_t lookahead = parse_lookahead(args.recv_lookahead);
  const runtime::PipelinePlan plan =
      reported_by_lead<Error>(lead, [&] { return runtime::build_pipeline_plan(job, world.size()); });
  const runtime::TrainConfig t = job.global_train();
  if (lead) print_header(args, job, plan, t, lookahead, threads);

  MemoryTracker tracker(args.capacity);
  runtime::TrainingRunOptions options;
  options.trainer.recv_lookahead = lookahead;
  options.trainer.failure = runtime::parse_failure_injection(args.inject_failure, "--inject-failure");
  options.resume = args.resume;
  options.stop_at = args.stop_at;
  options.allow_recipe_change = args.allow_recipe_change;
  if (job.run.checkpoint && job.run.checkpoint->on_signal) {
    options.trainer.stop_requested = [] { return stop_signal() != 0; };
  }
  std::unique_ptr<runtime::TrainingRun> run = reported_by_lead<Error>(lead, [&] {
    note_progress("setting up the run: data, parameters, checkpoint");
    std::unique_ptr<runtime::TrainingRun> r;
    try {
      r = std::make_unique<runtime::TrainingRun>(job, plan, world, tracker, options);
    } catch (const HostOutOfMemoryError& e) {
      throw Error(std::string(e.what()) + "; this rank's stages hold " + parameters_of_rank(plan, rank) +
                  " before gradients and optimizer state");
    }
    if (args.trace_step >= 0 && (args.trace_step < r->start_step() || args.trace_step >= r->stop_step())) {
      throw Error("--trace-step " + std::to_string(args.trace_step) + ": this run trains steps " +
                  std::to_string(r->start_step()) + ".." + std::to_string(r->stop_step() - 1));
    }
    return r;
  });
  std::unique_ptr<MetricsLog> metrics;
  SamplePrinter samples(job.run.data.tokenizer);
  if (lead) {
    print_run_setup(*run, job, args);
    metrics = std::make_unique<MetricsLog>(args.metrics);
    metrics->write({{"run", run_record(args, job, plan, t, run->start_step())}});
  }
  std::fflush(stdout);  // the header before the progress lines on stderr

  const int first = static_cast<int>(run->start_step());
  const int stop = static_cast<int>(run->stop_step());
  const int steps = stop - first;
  const bool timeline = !args.trace.empty() || !args.html.empty();
  const int trace_step = args.trace_step >= 0 ? args.trace_step : std::max(first, stop - 1);
  std::unique_ptr<ProgressBar> progress;
  if (lead) progress = std::make_unique<ProgressBar>(t.steps, t.tokens_per_step());
  const double start = monotonic_seconds();
  double bubble_sum = 0, makespan_sum = 0, step_sum = 0;
  std::vector<double> first_losses;
  std::deque<double> last_losses;  // a stop signal may end the run before `stop`
  int measured_steps = 0, skipped = 0;
  // Report the loss averaged over the first and last 10 steps; a run shorter than 20 steps
  // averages its first and last halves (the windows never overlap, so start and end differ
  // whenever the loss moved), a run of one step has one loss.
  constexpr int kAverage = 10;
  const int window = std::max(1, std::min(kAverage, steps / 2));
  runtime::MeasuredStep traced;
  std::vector<runtime::ShareChange> rebalances, traced_rebalances;  // the latter: before the traced step
  std::vector<runtime::LayerMove> moves, traced_moves;
  std::optional<runtime::PipelinePlan> traced_plan;  // the plan the traced step ran
  char line[512];
  while (!run->done()) {
    const int step = static_cast<int>(run->next_step());
    run->trainer().set_record_events(timeline && step == trace_step);
    if (step == trace_step) {
      traced_rebalances = rebalances;
      traced_moves = moves;
      if (timeline) traced_plan = run->trainer().plan();
    }
    const runtime::TrainingStep rec = reported_by_lead<runtime::CollectiveError>(lead, [&] { return run->next(); });
    if (rec.val_loss && lead) {
      std::snprintf(line, sizeof line, "  step %d: validation loss %.4f", step, *rec.val_loss);
      progress->note(line);
      metrics->write({{"step", step}, {"val_loss", *rec.val_loss}});
    }
    if (!rec.result) continue;  // the final validation
    rebalances.insert(rebalances.end(), rec.rebalances.begin(), rec.rebalances.end());
    moves.insert(moves.end(), rec.moves.begin(), rec.moves.end());
    const runtime::DistributedStepResult& r = *rec.result;
    // The schedule's ranks: their TP rank 0 (under TP the other ranks of a group measure the same
    // actions in lock-step, and the lead is one of them).
    comm::Communicator* schedule_ranks = run->trainer().schedule_world();
    const runtime::MeasuredStep measured =
        schedule_ranks ? runtime::gather_step(*schedule_ranks, r) : runtime::MeasuredStep{};
    // The first step warms caches and the buffer pools; time the rest (unless it is the only one).
    if (step > first || steps == 1) {
      bubble_sum += measured.bubble_fraction();
      makespan_sum += measured.makespan();
      step_sum += measured.step_seconds;
      ++measured_steps;
    }
    if (timeline && step == trace_step) traced = measured;
    if (static_cast<int>(first_losses.size()) < window) first_losses.push_back(r.loss);
    last_losses.push_back(r.loss);
    if (static_cast<int>(last_losses.size()) > window) last_losses.pop_front();
    if (r.skipped) ++skipped;
    // Each rank's peak memory so far, for --metrics (collective: every rank has the flag).
    const std::vector<MemoryReport> peaks =
        args.metrics.empty() ? std::vector<MemoryReport>{} : runtime::gather_memory_reports(world, tracker.report());
    if (!lead) continue;
    if (r.skipped) {
      progress->note("plait: warning: " + r.nonfinite +
                     "; skipped its update (train.on_nonfinite is \"skip\")");
    }
    progress->update(step, r.loss, r.lr);
    nlohmann::json m = {{"step", step}, {"loss", r.loss}, {"grad_norm", r.grad_norm}, {"lr", r.lr},
                        {"skipped", r.skipped}};
    if (r.skipped) m["nonfinite"] = r.nonfinite;
    std::vector<std::size_t> peak_bytes;
    for (const MemoryReport& p : peaks) peak_bytes.push_back(p.peak_total);
    std::vector<double> waits;
    for (const runtime::RankStepTimes& times : r.ranks) {
      waits.push_back(times.recv_wait_seconds + times.collective_wait_seconds);
    }
    const std::vector<double>& per_unit = rec.seconds_per_unit;  // as the straggler detector judged
    m["perf"] = {{"step_seconds", measured.step_seconds},
                 {"tokens_per_second", measured.step_seconds > 0 ? static_cast<double>(t.tokens_per_step()) / measured.step_seconds : 0.0},
                 {"peak_memory_bytes", peak_bytes},
                 {"seconds_per_unit", per_unit},
                 {"wait_seconds", waits}};
    metrics->write(m);
    for (const runtime::StragglerChange& c : rec.stragglers) {
      progress->note(runtime::describe(c));
      metrics->write({{"step", step},
                      {"straggler", {{"rank", c.rank}, {"flagged", c.flagged}, {"vs_history", c.vs_history}, {"vs_peers", c.vs_peers}}}});
    }
    if (!rec.rebalance_failure.empty()) progress->note("plait: warning: " + rec.rebalance_failure);
    for (const runtime::ShareChange& c : rec.rebalances) {
      std::snprintf(line, sizeof line, " (decided in %.2f ms)", 1e3 * rec.rebalance_seconds);
      progress->note(runtime::describe(c) + line);
      metrics->write({{"step", step},
                      {"rebalance", {{"stages", c.vstages}, {"ranks", c.ranks}, {"before", c.before}, {"after", c.after},
                                     {"rank", c.rank}, {"flagged", c.flagged}, {"slowdown", c.slowdown},
                                     {"decide_seconds", rec.rebalance_seconds}}}});
    }
    for (const runtime::LayerMove& mv : rec.moves) {
      progress->note(runtime::describe(mv));
      metrics->write({{"step", step},
                      {"move_layers", {{"made", mv.made}, {"from", mv.from}, {"to", mv.to}, {"layers", mv.layers},
                                       {"before", mv.before}, {"after", mv.after}, {"rank", mv.rank},
                                       {"flagged", mv.flagged}, {"slowdown", mv.slowdown}, {"bytes", mv.bytes},
                                       {"cost_seconds", mv.cost_seconds}, {"saved_per_step", mv.saved_per_step},
                                       {"horizon", mv.horizon}, {"gain_seconds", mv.gain_seconds},
                                       {"seconds", mv.seconds}, {"transfer_seconds", mv.transfer_seconds},
                                       {"why", mv.why}}}});
    }
    if (!rec.sample.empty()) metrics->write({{"step", step}, {"sample", samples.print(*progress, step, rec.sample)}});
    if (rec.stop_requests > 0) {
      progress->note(stop_note(rec, world.size()));
    } else if (!rec.checkpoint.empty()) {
      progress->note("  checkpoint: " + rec.checkpoint + " (after step " + std::to_string(step) +
                     "; a resume starts at step " + std::to_string(step + 1) + ")");
    }
  }
  const double secs = monotonic_seconds() - start;
  const std::vector<MemoryReport> memory = runtime::gather_memory_reports(world, tracker.report());
  const std::vector<MemoryReport> host = runtime::gather_memory_reports(world, run->trainer().host_tracker().report());
  const bool stopped = run->stopped_by_request();
  if (!lead) return stopped;
  progress->finish();
  metrics->write(memory_record(plan, memory, host));
  if (steps == 0) {
    std::printf("done: no steps to train (the checkpoint is at step %d of %d)\n", first, t.steps);
    return stopped;
  }
  const int last = static_cast<int>(run->next_step()) - 1;  // the last step trained
  const int trained = last + 1 - first;
  const auto mean = [](const auto& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); };
  const double first_loss = mean(first_losses), last_loss = mean(last_losses);
  const int head = static_cast<int>(first_losses.size()), tail = static_cast<int>(last_losses.size());
  char loss_text[160];
  if (trained == 1) {
    std::snprintf(loss_text, sizeof loss_text, "loss %.4f", last_loss);
  } else {
    std::snprintf(loss_text, sizeof loss_text, "loss (mean of %d step(s)) %.4f at the start (%d..%d) -> %.4f at the end (%d..%d)",
                  head, first_loss, first, first + head - 1, last_loss, last - tail + 1, last);
  }
  std::printf("done: %d steps (%d..%d) in %.1f s, %.0f tokens/s; %s%s%s\n", trained, first, last, secs,
              trained * static_cast<double>(t.tokens_per_step()) / secs, loss_text,
              skipped ? (" (" + std::to_string(skipped) + " non-finite step(s) skipped)").c_str() : "",
              stopped ? (" (stopped by a signal before step " + std::to_string(run->stop_step()) + ")").c_str() : "");
  if (measured_steps > 0) {
    std::printf("pipeline (measured, mean of %d step(s)%s): step %.4f s, pipeline makespan %.4f s, "
                "bubble %.2f%% (1 - busy / (ranks x makespan))\n",
                measured_steps, steps > 1 ? " after the first" : "", step_sum / measured_steps,
                makespan_sum / measured_steps, 100 * bubble_sum / measured_steps);
  }
  print_rank_memory_table(stdout, plan, memory);
  print_host_memory_table(stdout, plan, host);
  write_timelines(args, traced_plan ? *traced_plan : plan, traced, trace_step, traced_rebalances, traced_moves);
  if (stopped) {
    std::printf("preempted: exit status %d; continue with plait train --resume\n", runtime::kPreemptedExitStatus);
  }
  return stopped;
}

void run_train(TrainArgs args) {
  args.parse_numbers();
  const ThreadChoice threads = choose_threads(args.threads);
  omp_set_num_threads(threads.threads);
  // The configuration is read before MPI starts (each process reads it; main.cpp lets rank 0
  // alone report what every process finds). --resume DIR without --config continues with the
  // config the checkpoint recorded, writing new checkpoints beside the one resumed.
  runtime::JobConfig job;
  if (!args.config.empty()) {
    job = runtime::load_job_config(args.config);
  } else if (args.resume && !args.resume->empty()) {
    const runtime::ResumePoint point = runtime::find_resume_point(*args.resume);
    if (!point.reader) {
      throw InputError(*args.resume, "(checkpoint)",
                       std::filesystem::exists(*args.resume)
                           ? "no complete checkpoint to resume from, and no --config to start one"
                           : "does not exist, and without --config there is no configuration to start from");
    }
    job = runtime::job_config_of_checkpoint(*point.reader, point.root);
  } else {
    job = runtime::job_from_run_config(runtime::default_run_config());
  }
  if (args.steps > 0) {
    job.run.train.steps = args.steps;
    job.run.train.warmup_steps = std::min(job.run.train.warmup_steps, args.steps);
  }
  if (!args.precision.empty()) {
    job.run.train.precision = args.precision == "bf16" ? spec::Precision::bf16 : spec::Precision::fp32;
  }
  if (!args.grad_reduce.empty()) {
    job.run.train.grad_reduce = args.grad_reduce == "bf16" ? spec::GradReduce::bf16 : spec::GradReduce::fp32;
  }
  if (const std::string why = runtime::grad_reduce_mismatch(job.run.train); !why.empty()) {
    throw InputError(args.grad_reduce.empty() ? job.run.source : "plait train",
                     args.grad_reduce.empty() ? "train.grad_reduce" : "--grad-reduce", why);
  }
  apply_parallel_flags(args.layout, job);
  // Output files are written at the end of the run: a missing directory is created now, and one
  // that cannot be is an error before any training.
  for (const auto& [flag, path] : {std::pair{"--trace", args.trace}, {"--html", args.html}, {"--metrics", args.metrics}}) {
    if (!path.empty()) prepare_output_path(flag, path);
  }
  // The stall watchdog's thread talks to the other ranks while the main thread waits on them.
  const double stall = job.run.train.stall_timeout_s;
  const bool watch = stall > 0 && comm::launched_by_mpi_launcher();
  std::exception_ptr failure;
  bool stopped = false;
  {
    comm::MpiSession session({}, watch ? comm::ThreadLevel::kMultiple : comm::ThreadLevel::kSerialized);
    // After MPI_Init, so that these handlers are the ones in place (docs/checkpoints.md,
    // "Preemption"); without them (no checkpoint section, or checkpoint.on_signal false) a
    // signal ends the process as it always would.
    if (job.run.checkpoint && job.run.checkpoint->on_signal) install_stop_signal_handlers(session.rank());
    try {
      if (watch && session.size() > 1) {
        if (session.thread_level() == comm::ThreadLevel::kMultiple) {
          session.start_watchdog(stall, "train.stall_timeout_s");
        } else if (session.rank() == 0) {
          std::fprintf(stderr, "plait: warning: the MPI library does not provide MPI_THREAD_MULTIPLE; "
                               "the stall watchdog (train.stall_timeout_s) is off\n");
        }
      }
      stopped = train_ranks(session, job, args, threads);
    } catch (const std::exception& e) {
      // With several ranks, stop them all at once naming this rank (docs/comm.md); a job of one
      // rank finalizes MPI normally and reports the error like any other command.
      if (session.size() > 1) comm::abort_job(e.what());
      failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  if (stopped) throw ExitStatus{runtime::kPreemptedExitStatus};
}

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train",
      "Train a GPT on a text corpus or token shards (plait data prepare) with AdamW, warm-up +\n"
      "cosine learning rate and gradient clipping, with pipeline and data parallelism: `mpirun -np\n"
      "N plait train --config FILE` runs the layout and schedule of the config's \"parallel\"\n"
      "section (docs/runtime.md); without mpirun it is one rank. The config's \"checkpoint\"\n"
      "section saves checkpoints that --resume continues exactly (docs/checkpoints.md). Under\n"
      "mpirun a stall watchdog ends a job in which no rank makes progress for\n"
      "train.stall_timeout_s (default 300 s), naming each rank and what it waits on. With a\n"
      "checkpoint section, SIGUSR1, SIGTERM or SIGINT save and stop: every rank stops after the\n"
      "same step, its checkpoint is saved and the job exits 75 (preempted; a second signal exits at\n"
      "once; checkpoint.on_signal, docs/checkpoints.md \"Preemption\"). Without\n"
      "--config: a small built-in default that runs in a couple of minutes on 2 cores\n"
      "(configs/default.json).");
  auto args = std::make_shared<TrainArgs>();
  cmd->add_option("--config", args->config,
                  "JSON file with sections model, train, data, checkpoint and parallel (docs/config.md)")
      ->type_name("FILE");
  cmd->add_option("--steps", args->steps_text, "Override train.steps (for a quick look)")->type_name("N");
  cmd->add_option("--precision", args->precision,
                  "Override train.precision: fp32, or bf16 mixed precision (bf16 activations and "
                  "compute weights, fp32 master weights, gradients and AdamW state; docs/engine.md)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->type_name("fp32|bf16");
  cmd->add_option("--grad-reduce", args->grad_reduce,
                  "Override train.grad_reduce: what data parallelism reduces, fp32 gradients (default) or\n"
                  "bf16 ones (with --precision bf16: half the bytes on the wire, one bf16 rounding per\n"
                  "rank's gradient and partial sum; docs/engine.md)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->type_name("fp32|bf16");
  cmd->add_option("--threads", args->threads_text,
                  "OpenMP/OpenBLAS threads per rank (default: OMP_NUM_THREADS; else under mpirun\n"
                  "the hardware threads divided by the ranks on this node, at least 1; else all\n"
                  "cores). The header prints the number and where it came from")
      ->type_name("N");
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
                  "format of plait sim --trace); a missing directory is created when the run starts")
      ->type_name("FILE");
  cmd->add_option("--html", args->html,
                  "Write the measured timeline of that step as a self-contained HTML page (the\n"
                  "format of plait sim --html); a missing directory is created when the run starts")
      ->type_name("FILE");
  cmd->add_option("--trace-step", args->trace_step_text,
                  "Which step --trace/--html record, counting from 0 (default: the last); it must be\n"
                  "a step this run trains")
      ->type_name("N");
  CLI::Option* resume = cmd->add_option("--resume", args->resume_dir,
                  "Continue from a checkpoint. DIR is a step directory (step_00000100), or a\n"
                  "checkpoint root: its newest complete checkpoint that verifies (newer ones that\n"
                  "do not are skipped, saying why; `latest` is repaired). Without DIR: the\n"
                  "config's checkpoint.dir; a root that does not exist yet or holds no complete\n"
                  "checkpoint starts at step 0, so a restart loop can always pass --resume.\n"
                  "Checkpoints newer than the one resumed are kept aside (renamed to\n"
                  "step_<N>.aside, never deleted). Parameters, AdamW moments and step count, data\n"
                  "position and seed are restored; the layout may differ from the one that saved\n"
                  "it, the recipe may not (--allow-recipe-change). Without --config: the\n"
                  "checkpoint's own config (paths as its run saw them), writing new checkpoints\n"
                  "beside the one resumed")
      ->expected(0, 1)
      ->type_name("[DIR]");
  cmd->add_flag("--allow-recipe-change", args->allow_recipe_change,
                "With --resume: continue although the optimizer (train.weight_decay, beta1, beta2,\n"
                "eps, grad_clip), learning-rate schedule (lr, min_lr, warmup_steps, steps; --steps\n"
                "too), batch (seq, microbatch_size, micro-batches per step), seed or data (by its\n"
                "checksums) differ from the checkpoint's; each change is printed. Without it such a\n"
                "resume is refused, naming every change. The model may never differ");
  cmd->add_option("--stop-at", args->stop_at_text,
                  "Stop before this step, saving a checkpoint there (with a checkpoint section),\n"
                  "without changing train.steps, which sets the learning-rate schedule; continue\n"
                  "later with --resume. A step after the start and at most train.steps")
      ->type_name("STEP");
  cmd->add_option("--metrics", args->metrics,
                  "Append one JSON line per step ({step, loss, grad_norm, lr, skipped, perf:\n"
                  "{step_seconds, tokens_per_second, peak_memory_bytes, seconds_per_unit and\n"
                  "wait_seconds per rank}}), per straggler flagged or cleared, per re-balance, per\n"
                  "layer move (made or declined), per validation ({step, val_loss}) and per sample to\n"
                  "FILE, with a run record at the start and\n"
                  "the memory by rank at the end; numbers in round-trip precision. plait report\n"
                  "draws it (docs/runtime.md, \"Metrics and the training report\")")
      ->type_name("FILE");
  // Failure tests only: RANK:STEP[:kill|nan-loss|nan-grad|kill-in-save|kill-in-eval|
  // kill-in-commit|stop|hang|sigterm|sigusr1|slow=F] (runtime/failure_injection.h).
  cmd->add_option("--inject-failure", args->inject_failure)->group("");
  cmd->callback([args, resume] {
    if (resume->count() > 0) args->resume = args->resume_dir;
    run_train(*args);
  });
}

const CommandRegistration kRegistration(10, register_train);

}  // namespace
}  // namespace plait::cli
