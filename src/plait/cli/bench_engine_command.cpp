// `plait bench engine`: times full training steps (forward, backward, AdamW) of a model of either
// family — a preset or config (GPT-2 small by default) with shape options on top — and, in the
// same run and with the same threads, the machine's sgemm peak, and reports the achieved FLOP
// rate against that peak (docs/engine.md, "Benchmark"), in fp32, bf16 or both.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "plait/cli/commands.h"
#include "plait/cli/memory_summary.h"
#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/load_average.h"
#include "plait/kernels/attention_path.h"
#include "plait/kernels/cpu_backend.h"
#include "plait/kernels/gemm_peak.h"
#include "plait/runtime/local_trainer.h"
#include "plait/spec/model_presets.h"
#include "plait/spec/unit_memory.h"

extern "C" char* openblas_get_corename(void);

namespace plait::cli {
namespace {

struct BenchArgs {
  std::string model = "gpt2-small";
  // Shape options over the model's (0 / empty: the model's own).
  std::string family;
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  std::int64_t max_seq = 0;
  int seq = 512;
  int batch = 4;
  int microbatches = 1;
  int segments = 1;
  int threads = 0;
  int steps = 3;
  int warmup = 1;
  int peak_size = 4096;
  int peak_repeats = 3;
  bool untied = false, tied = false;
  std::string precision = "both";  // fp32, bf16 or both (fp32 first)
};

// The benchmarked model: the preset or config, then the shape options. A changed hidden size
// re-derives gpt2's ffn (4 * hidden); gpt2 has kv_heads = heads; a llama without kv heads given
// takes multi-head attention when its heads change.
spec::ModelSpec bench_model(const BenchArgs& a) {
  spec::ModelSpec m = spec::resolve_model(a.model, a.seq).model;
  const bool family_changed = !a.family.empty() && spec::parse_family(a.family) != m.family;
  if (!a.family.empty()) {
    if (a.family != "gpt2" && a.family != "llama") {
      throw InputError("plait bench engine", "--family", "expected gpt2 or llama, found '" + a.family + "'");
    }
    m.family = spec::parse_family(a.family);
    if (family_changed) m.tie_embeddings = m.family == spec::Family::gpt2;
  }
  for (auto [flag, value] : {std::pair{"--layers", a.layers}, {"--hidden", a.hidden}, {"--heads", a.heads},
                             {"--kv-heads", a.kv_heads}, {"--ffn", a.ffn}, {"--vocab", a.vocab}}) {
    if (value < 0) {
      throw InputError("plait bench engine", flag, "expected a positive integer, found " + std::to_string(value));
    }
  }
  if (a.layers) m.layers = a.layers;
  if (a.hidden) m.hidden = a.hidden;
  if (a.heads) m.heads = a.heads;
  if (a.vocab) m.vocab = a.vocab;
  if (a.max_seq) m.max_seq = a.max_seq;
  if (m.family == spec::Family::gpt2) {
    if (a.kv_heads) throw InputError("plait bench engine", "--kv-heads", "a llama option (gpt2 has kv_heads = heads)");
    m.kv_heads = m.heads;
    if (a.ffn) {
      m.ffn_hidden = a.ffn;
    } else if (a.hidden || family_changed) {
      m.ffn_hidden = 4 * m.hidden;
    }
  } else {
    if (a.kv_heads) {
      m.kv_heads = a.kv_heads;
    } else if (a.heads || family_changed) {
      m.kv_heads = m.heads;
    }
    if (a.ffn) {
      m.ffn_hidden = a.ffn;
    } else if (family_changed) {
      throw InputError("plait bench engine", "--ffn", "a llama model needs its MLP width (e.g. --ffn 2048)");
    }
  }
  if (a.untied) m.tie_embeddings = false;
  if (a.tied) m.tie_embeddings = true;
  spec::check_model_spec(m, "plait bench engine");
  return m;
}

// Uniform random tokens: the engine's cost does not depend on the text.
class RandomBatches : public data::BatchSource {
 public:
  RandomBatches(int seq, int rows, int microbatches, int vocab)
      : seq_(seq), rows_(rows), microbatches_(microbatches), vocab_(vocab) {}
  void fill(std::int64_t step, int mb, std::int32_t* inputs, std::int32_t* targets) const override {
    std::mt19937 rng(static_cast<unsigned>(step * 7919 + mb));
    std::uniform_int_distribution<int> dist(0, vocab_ - 1);
    for (int i = 0; i < seq_ * rows_; ++i) {
      inputs[i] = dist(rng);
      targets[i] = dist(rng);
    }
  }
  int seq() const override { return seq_; }
  int microbatch_size() const override { return rows_; }
  int microbatches_per_step() const override { return microbatches_; }

 private:
  int seq_, rows_, microbatches_, vocab_;
};

// The GEMM peak a precision's steps are compared with, measured with the same threads: fp32,
// OpenBLAS's sgemm (the fp32 engine's matmuls); bf16, the bf16 GEMM on the CPU backend's path
// (oneDNN's matmul where the ISA multiplies bf16 natively, else the widened sgemm), the bf16
// engine's matmuls. n^3, best of `repeats` after one untimed call (kernels/gemm_peak.h).
double gemm_peak_gflops(spec::Precision precision, int n, int repeats) {
  if (precision == spec::Precision::bf16) {
    return kernels::bf16_gemm_peak_gflops(kernels::cpu_backend().onednn(), n, repeats);
  }
  return kernels::sgemm_peak_gflops(n, repeats);
}

const char* peak_name(spec::Precision precision) {
  return precision == spec::Precision::bf16 ? "bf16 GEMM peak" : "sgemm peak";
}

struct PrecisionResult {
  spec::Precision precision = spec::Precision::fp32;
  double best_tokens_per_second = 0, best_fraction = 0, median_fraction = 0, peak = 0;
};

// Times args.steps steps (after args.warmup) in one precision, between two measurements of its
// GEMM peak, and prints every step, the result line and the memory by category.
PrecisionResult bench_precision(const BenchArgs& args, const spec::ModelSpec& m, runtime::TrainConfig t,
                                double step_flops, spec::Precision precision) {
  t.precision = precision;
  const spec::SequencePartition partition = spec::cut_sequence(m, t.seq, t.segments);
  const double tokens = static_cast<double>(t.tokens_per_step());
  const char* peak_label = peak_name(precision);
  std::printf("\n%s: %s\n", std::string(spec::precision_name(precision)).c_str(), load_average_text().c_str());
  kernels::OneDnnContext* onednn = nullptr;
  if (precision == spec::Precision::bf16) {
    onednn = &kernels::cpu_backend().onednn();
    std::printf("  %s; %s\n", onednn->describe().c_str(), kernels::describe_attention_bf16_path().c_str());
  } else {
    std::printf("  OpenBLAS %s\n", openblas_get_corename());
  }
  const double peak_before = gemm_peak_gflops(precision, args.peak_size, args.peak_repeats);
  std::printf("  %s (%d^3, best of %d): %.1f GFLOP/s\n", peak_label, args.peak_size, args.peak_repeats,
              peak_before);

  MemoryTracker tracker;
  runtime::LocalTrainer trainer(m, t, partition, tracker);
  const RandomBatches batches(args.seq, args.batch, args.microbatches, m.vocab);
  std::vector<double> times;
  std::printf("  %-6s %9s %10s %10s %8s  %s\n", "step", "time (s)", "tokens/s", "GFLOP/s", "of peak",
              "forward / backward / optimizer (s)");
  std::size_t allocations_before = 0, creations_before = 0;
  double creation_seconds_before = 0;
  for (int step = 0; step < t.steps; ++step) {
    const bool warm = step < args.warmup;
    if (step == args.warmup) {
      tracker.reset_peaks();
      allocations_before = trainer.model().pool().system_allocations();
      if (onednn) {
        creations_before = onednn->primitive_creations();
        creation_seconds_before = onednn->primitive_creation_seconds();
      }
    }
    const double t0 = monotonic_seconds();
    const runtime::StepResult r = trainer.step(step, batches);
    const double dt = monotonic_seconds() - t0;
    if (!warm) times.push_back(dt);
    std::printf("  %-6s %9.3f %10.1f %10.1f %7.1f%%  %.3f / %.3f / %.3f  (loss %.3f)\n",
                (warm ? "warm-up" : std::to_string(step - args.warmup + 1)).c_str(), dt, tokens / dt,
                step_flops / dt / 1e9, 100.0 * step_flops / dt / 1e9 / peak_before, r.forward_seconds,
                r.backward_seconds, r.optimizer_seconds, r.loss);
  }
  const double peak_after = gemm_peak_gflops(precision, args.peak_size, args.peak_repeats);
  const double peak = std::max(peak_before, peak_after);
  std::printf("  %s again after the steps: %.1f GFLOP/s; using the higher, %.1f GFLOP/s; %s\n", peak_label,
              peak_after, peak, load_average_text().c_str());
  PrecisionResult result{precision};
  result.peak = peak;
  if (times.empty()) return result;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double best = sorted.front(), median = sorted[sorted.size() / 2];
  result.best_tokens_per_second = tokens / best;
  result.best_fraction = step_flops / best / 1e9 / peak;
  result.median_fraction = step_flops / median / 1e9 / peak;
  std::printf("result %s: best step %.3f s: %.1f tokens/s, %.1f GFLOP/s = %.1f%% of the %s (median step "
              "%.3f s: %.1f%%)\n",
              std::string(spec::precision_name(precision)).c_str(), best, result.best_tokens_per_second,
              step_flops / best / 1e9, 100.0 * result.best_fraction, peak_label, median,
              100.0 * result.median_fraction);
  std::printf("  working-memory blocks newly allocated during the timed steps: %zu (the pool reuses "
              "the warm-up's)\n",
              trainer.model().pool().system_allocations() - allocations_before);
  if (onednn) {
    // Creations inside the timed steps are part of their time: shapes first seen there (a new
    // segment length, say) cost a creation each (onednn_context.h, "Shapes").
    std::printf("  oneDNN matmul primitives created during the timed steps: %zu (%.1f ms, in the step "
                "times); %zu cached of at most %zu\n",
                onednn->primitive_creations() - creations_before,
                1e3 * (onednn->primitive_creation_seconds() - creation_seconds_before),
                onednn->cached_primitives(), onednn->cache_capacity());
  }
  print_memory_summary(stdout, tracker.report());
  return result;
}

std::vector<spec::Precision> bench_precisions(const std::string& text) {
  if (text == "both") return {spec::Precision::fp32, spec::Precision::bf16};
  if (text == "fp32") return {spec::Precision::fp32};
  if (text == "bf16") return {spec::Precision::bf16};
  throw InputError("plait bench engine", "--precision", "expected fp32, bf16 or both, found '" + text + "'");
}

void run_bench(BenchArgs args) {
  if (args.threads > 0) omp_set_num_threads(args.threads);
  const int threads = omp_get_max_threads();
  for (auto [flag, value] : {std::pair{"--seq", args.seq}, {"--batch", args.batch},
                             {"--microbatches", args.microbatches}, {"--segments", args.segments},
                             {"--steps", args.steps}, {"--peak-size", args.peak_size},
                             {"--peak-repeats", args.peak_repeats}}) {
    if (value < 1) {
      throw InputError("plait bench engine", flag, "expected a positive integer, found " +
                                                       std::to_string(value));
    }
  }
  if (args.warmup < 0) throw InputError("plait bench engine", "--warmup", "expected >= 0");
  if (args.untied && args.tied) throw InputError("plait bench engine", "--tied", "give --tied or --untied, not both");
  const std::vector<spec::Precision> precisions = bench_precisions(args.precision);
  const spec::ModelSpec m = bench_model(args);
  if (args.seq > m.max_seq) {
    throw InputError("plait bench engine", "--seq",
                     "sequence length " + std::to_string(args.seq) + " exceeds --max-seq " +
                         std::to_string(m.max_seq));
  }
  runtime::TrainConfig t;
  t.steps = args.warmup + args.steps;
  t.seq = args.seq;
  t.microbatch_size = args.batch;
  t.microbatches = args.microbatches;
  t.lr = 1e-4;
  t.min_lr = 1e-5;
  t.segments.count = args.segments;

  // FLOPs per step. Matmuls: 6 * parameters * tokens (2 forward + 4 backward per weight and
  // token; Kaplan et al. 2020, eq. 2.1), without the lookup tables no matmul reads: the position
  // table (gpt2) and the token table when the LM head is untied (a tied table is the head's
  // matmul and counts once).
  // Attention: per layer and sequence the causal query-key pairs are P = T(T+1)/2 (for any
  // segmentation); QK^T and PV cost 2*C*P each forward and twice that backward, so
  // 12 * C * P per layer and sequence, i.e. 6 * L * C * T(T+1) per sequence. This counts only
  // the causal half that has to be computed (PaLM's 12*L*H*Q*T per token counts the full square).
  const double tokens = static_cast<double>(t.tokens_per_step());
  const double sequences = static_cast<double>(args.batch) * args.microbatches;
  const double params = static_cast<double>(m.parameter_count());
  const double lookups = (m.learned_positions() ? static_cast<double>(m.max_seq) * m.hidden : 0.0) +
                         (m.tie_embeddings ? 0.0 : static_cast<double>(m.vocab) * m.hidden);
  const double matmul_flops = 6.0 * (params - lookups) * tokens;
  const double attention_flops =
      6.0 * m.layers * m.hidden * static_cast<double>(args.seq) * (args.seq + 1.0) * sequences;
  const double step_flops = matmul_flops + attention_flops;

  std::printf("plait bench engine: %s (%s), seq=%d, %d micro-batch(es) of %d sequences, "
              "%d segment(s), precision %s, %d thread(s)\n",
              args.model.c_str(), spec::describe(m).c_str(), args.seq, args.microbatches, args.batch,
              args.segments, args.precision.c_str(), threads);
  std::printf("  parameters %.0f (%.2fM; %.2fM in lookup tables); per step: %.0f tokens, "
              "6*matmul params*tokens = %.1f GFLOP, attention 6*L*C*T(T+1)*sequences = %.1f GFLOP, "
              "total %.1f GFLOP (the same count in either precision)\n",
              params, params / 1e6, lookups / 1e6, tokens, matmul_flops / 1e9, attention_flops / 1e9,
              step_flops / 1e9);
  std::vector<PrecisionResult> results;
  for (spec::Precision precision : precisions) results.push_back(bench_precision(args, m, t, step_flops, precision));
  if (results.size() == 2 && results[0].best_tokens_per_second > 0) {
    std::printf("\nbf16 / fp32: %.2fx the tokens/s (best steps: %.1f against %.1f); %.1f%% of the bf16 GEMM "
                "peak against %.1f%% of the sgemm peak\n",
                results[1].best_tokens_per_second / results[0].best_tokens_per_second,
                results[1].best_tokens_per_second, results[0].best_tokens_per_second,
                100.0 * results[1].best_fraction, 100.0 * results[0].best_fraction);
  }
}

void register_bench_engine(CLI::App& app) {
  CLI::App* group = command_group(app, "bench", "Benchmarks (they print figures; they are not tests)");
  auto* cmd = group->add_subcommand(
      "engine",
      "Time full training steps (forward, backward, AdamW) of a model of either family (a preset\n"
      "or config, GPT-2 small by default; the shape options change it), and the sgemm peak in the\n"
      "same run; print tokens/s, achieved GFLOP/s (6*matmul params*tokens plus causal attention\n"
      "FLOPs) and the fraction of that peak, and peak memory by category. In bf16 the peak is the\n"
      "bf16 GEMM's (oneDNN; the line names the ISA and path, and the bf16 attention's tile\n"
      "products: dpbf16 or widened-fp32, PLAIT_BF16_ATTENTION=widened forcing the latter), measured\n"
      "before and after the steps, each with the load average.");
  auto args = std::make_shared<BenchArgs>();
  cmd->add_option("--model", args->model,
                  "Model preset or JSON config whose \"model\" section is used; presets:\n" +
                      spec::model_preset_lines())
      ->capture_default_str();
  cmd->add_option("--family", args->family, "Change the family: gpt2 or llama");
  cmd->add_option("--layers", args->layers, "Transformer layers");
  cmd->add_option("--hidden", args->hidden, "Hidden size C");
  cmd->add_option("--heads", args->heads, "Attention (query) heads, dividing hidden");
  cmd->add_option("--kv-heads", args->kv_heads, "Key/value heads (llama), dividing heads");
  cmd->add_option("--ffn", args->ffn, "MLP width (gpt2 default 4 x hidden)");
  cmd->add_option("--vocab", args->vocab, "Vocabulary size");
  cmd->add_option("--seq", args->seq, "Sequence length T")->capture_default_str();
  cmd->add_option("--max-seq", args->max_seq,
                  "Positions in the model (default for presets: --seq, so wpe holds only used rows)");
  cmd->add_option("--batch", args->batch, "Sequences per micro-batch")->capture_default_str();
  cmd->add_option("--microbatches", args->microbatches, "Micro-batches per step")
      ->capture_default_str();
  cmd->add_option("--segments", args->segments,
                  "Process each sequence as this many segments (Seq1F1B attention)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads,
                  "OpenMP/OpenBLAS/oneDNN threads, for the steps and the GEMM peaks alike (default: all)");
  cmd->add_option("--steps", args->steps, "Timed steps")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "Untimed steps first")->capture_default_str();
  cmd->add_option("--peak-size", args->peak_size, "n of the n x n x n GEMM peak measurements")
      ->capture_default_str();
  cmd->add_option("--peak-repeats", args->peak_repeats, "Timed GEMM calls per peak measurement (best one counts)")
      ->capture_default_str();
  cmd->add_option("--precision", args->precision,
                  "fp32, bf16 (mixed precision: bf16 GEMMs and attention, fp32 master weights) or\n"
                  "both, one after the other with each one's GEMM peak")
      ->capture_default_str();
  cmd->add_flag("--untied", args->untied, "Separate LM head instead of the tied embedding");
  cmd->add_flag("--tied", args->tied, "LM head tied to the token embedding");
  cmd->callback([args] { run_bench(*args); });
}

const CommandRegistration kRegistration(80, register_bench_engine);

}  // namespace
}  // namespace plait::cli
