// `plait train`: single-process training of a GPT on a text corpus (docs/engine.md). Without
// --config it trains the built-in small default (configs/default.json) on the fortunes corpus.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "plait/cli/commands.h"
#include "plait/cli/memory_summary.h"
#include "plait/cli/progress_bar.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/data/batch_loader.h"
#include "plait/data/byte_tokenizer.h"
#include "plait/data/text_corpus.h"
#include "plait/runtime/local_trainer.h"
#include "plait/runtime/train_config.h"

namespace plait::cli {
namespace {

struct TrainArgs {
  std::string config;
  int steps = 0;
  int threads = 0;
  std::string memory_limit;
};

// "512MiB", "2GiB", "1000000" (bytes) -> bytes.
std::size_t parse_bytes(const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    throw InputError("--memory-limit", text, "expected a size such as 512MiB or 2GiB");
  }
  const std::string unit = text.substr(pos);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024;
  if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (scale == 0 || value <= 0) {
    throw InputError("--memory-limit", text, "expected a size such as 512MiB or 2GiB");
  }
  return static_cast<std::size_t>(value * scale);
}

void run_train(const TrainArgs& args) {
  if (args.threads > 0) omp_set_num_threads(args.threads);
  runtime::RunConfig config = args.config.empty() ? runtime::default_run_config()
                                                  : runtime::load_run_config(args.config);
  if (args.steps > 0) {
    config.train.steps = args.steps;
    config.train.warmup_steps = std::min(config.train.warmup_steps, args.steps);
  }
  const model::GPTConfig& m = config.model;
  const runtime::TrainConfig& t = config.train;
  std::printf("plait train: config %s\n", args.config.empty()
                                              ? "built-in default (the same as configs/default.json)"
                                              : args.config.c_str());
  std::printf("  model: %d layers, hidden %d, %d heads, vocab %d, max_seq %d, %s embeddings: %.2fM "
              "parameters\n",
              m.layers, m.hidden, m.heads, m.vocab, m.max_seq, m.tie_embeddings ? "tied" : "untied",
              m.parameter_count() / 1e6);
  std::printf("  train: %d steps of %d x %d sequences of %d tokens (%lld tokens/step), %zu "
              "segment(s), lr %.2e -> %.2e (warm-up %d), AdamW wd %.2f, clip %.2f, %d threads\n",
              t.steps, t.microbatches, t.microbatch_size, t.seq,
              static_cast<long long>(t.tokens_per_step()), t.segments().size(), t.lr, t.min_lr,
              t.warmup_steps, t.weight_decay, t.grad_clip, omp_get_max_threads());

  const data::TextCorpus corpus = data::read_text_corpus(config.data.paths);
  const std::vector<std::uint16_t> tokens = data::ByteTokenizer::encode(corpus.text);
  std::printf("  data: %zu file(s) under %s%s, %zu tokens (byte-level)\n", corpus.files.size(),
              config.data.paths.front().c_str(), config.data.paths.size() > 1 ? " ..." : "",
              tokens.size());
  const data::BatchLoader batches(tokens, t.seq, t.microbatch_size, t.microbatches, t.seed);
  std::fflush(stdout);  // the header before the progress lines on stderr

  std::optional<std::size_t> capacity;
  if (!args.memory_limit.empty()) capacity = parse_bytes(args.memory_limit);
  MemoryTracker tracker(capacity);
  runtime::LocalTrainer trainer(m, t, tracker);

  ProgressBar progress(t.steps, t.tokens_per_step());
  const double start = monotonic_seconds();
  double first_loss = 0, last_loss = 0;
  constexpr int kAverage = 10;  // report the loss averaged over the first and last 10 steps
  const int window = std::min(kAverage, t.steps);
  for (int step = 0; step < t.steps; ++step) {
    const runtime::StepResult r = trainer.step(step, batches);
    if (step < window) first_loss += r.loss / window;
    if (step >= t.steps - window) last_loss += r.loss / window;
    progress.update(step, r.loss, r.lr);
  }
  progress.finish();
  const double secs = monotonic_seconds() - start;
  std::printf("done: %d steps in %.1f s, %.0f tokens/s; loss (mean of %d steps) %.4f at the start "
              "-> %.4f at the end\n",
              t.steps, secs, t.steps * static_cast<double>(t.tokens_per_step()) / secs, window,
              first_loss, last_loss);
  print_memory_summary(stdout, tracker.report());
}

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train",
      "Train a GPT on a text corpus in one process (byte-level tokens, AdamW, warm-up + cosine\n"
      "learning rate, gradient clipping). Without --config: a small built-in default that runs\n"
      "in a couple of minutes on 2 cores (configs/default.json).");
  auto args = std::make_shared<TrainArgs>();
  cmd->add_option("--config", args->config,
                  "JSON file with sections model, train and data (docs/config.md)")
      ->type_name("FILE");
  cmd->add_option("--steps", args->steps, "Override train.steps (for a quick look)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", args->threads,
                  "OpenMP/OpenBLAS threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory-limit", args->memory_limit,
                  "Memory capacity for the accounting (e.g. 512MiB, 2GiB): exceeding it is an\n"
                  "out-of-memory error naming the category, as on a device of that size")
      ->type_name("SIZE");
  cmd->callback([args] { run_train(*args); });
}

const CommandRegistration kRegistration(10, register_train);

}  // namespace
}  // namespace plait::cli
