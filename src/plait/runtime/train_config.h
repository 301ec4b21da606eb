#pragma once
// The training configuration file: {"model": {...}, "train": {...}, "data": {...},
// "checkpoint": {...}}, read strictly (unknown sections and fields are errors naming the file
// and field). The "model" section is spec::read_model_spec's (either family, within the engine's
// limits, model/engine_limits.h); the others are below (the "parallel" section is
// parallel_config.h's). docs/config.md documents every field.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/runtime/straggler_detector.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/precision_policy.h"
#include "plait/spec/sequence_partition.h"
#include "plait/spec/unit_memory.h"

namespace plait::runtime {

struct TrainConfig {
  int steps = 0;            // optimizer steps
  int seq = 0;              // tokens per sequence (<= model.max_seq)
  int microbatch_size = 0;  // sequences per micro-batch (rows)
  int microbatches = 1;     // micro-batches per step (gradient accumulation)
  double lr = 6e-4;         // peak learning rate
  double min_lr = 6e-5;     // floor of the cosine decay (default lr / 10)
  int warmup_steps = 0;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // max global gradient norm; 0 disables clipping
  std::uint64_t seed = 1234;
  // How each sequence is cut into segments (Seq1F1B): train.segments (a count or the lengths),
  // with parallel.split's method; one segment by default. RunConfig::partition() cuts it.
  spec::SegmentRequest segments;
  // Validation loss on the held-out split every eval_every steps (0: never), over eval_batches
  // batches of the global batch's shape (llm.c's val_num_batches).
  int eval_every = 0;
  int eval_batches = 1;
  // A sample of sample_tokens new tokens after every sample_every steps (0: never), decoded
  // through the pipeline (runtime/pipeline_sampler.h) from the data's document separator
  // (GPT-2's <|endoftext|>, a newline for bytes), as llm.c prints while it trains.
  int sample_every = 0;
  int sample_tokens = 64;
  // A step whose loss or gradients are not finite: stop the job (kAbort), or skip its optimizer
  // update and go on (kSkip). Every rank takes the same decision (the check is reduced).
  enum class OnNonFinite { kAbort, kSkip };
  OnNonFinite on_nonfinite = OnNonFinite::kAbort;
  // The stall watchdog (comm/watchdog.h): the job ends when no rank has made progress for this
  // many seconds; 0 disables it.
  double stall_timeout_s = 300;
  // The element types of the engine's tensors (spec/precision_policy.h): "fp32", or "bf16"
  // mixed precision (a plan file's "mixed16" means bf16). fp16 is refused: it would need loss
  // scaling, which bf16's fp32 exponent range makes unnecessary.
  spec::Precision precision = spec::Precision::fp32;
  // What data parallelism reduces (spec/precision_policy.h, GradReduce): "fp32" (default), or
  // "bf16" (bf16 precision only): half the bytes on the wire, one bf16 rounding per rank's
  // gradient and per partial sum (docs/engine.md, "Mixed precision (bf16)").
  spec::GradReduce grad_reduce = spec::GradReduce::fp32;

  std::int64_t tokens_per_step() const {
    return std::int64_t{seq} * microbatch_size * microbatches;
  }
};

// Where the tokens come from: a text corpus tokenized byte by byte when the run starts
// (`paths`, random windows: data::BatchLoader), or llm.c token shards written by `plait data
// prepare` (`shards`, read in order by the resumable data::SequentialLoader).
struct DataConfig {
  // Text files or directories (read recursively; binary files skipped), byte-level tokens.
  std::vector<std::string> paths = {"/usr/share/games/fortunes"};
  // Held-out text for validation (byte-level), with `paths`.
  std::vector<std::string> val_paths;
  // A directory of shards (its *_train_* files train, *_val_* validate) or one train shard.
  std::string shards;
  // What the shards hold: "byte" (vocabulary 256) or "gpt2" (50257); model.vocab must be at
  // least that (llm.c pads GPT-2's to 50304).
  std::string tokenizer = "byte";
  // How sequences are cut from the shards (docs/data.md, "Packing"): "stream", windows of the
  // concatenated stream (llm.c's); "documents", whole documents packed into each sequence,
  // padded (data/packed_sequences.h). Shards only.
  std::string packing = "stream";
  // How packed sequences are ordered into micro-batches (docs/data.md, "Balancing"): "none",
  // the packing's order; "wlb", each window of balance_window steps reordered so that every
  // micro-batch carries about the same attention work (data/balanced_order.h). Needs "documents".
  std::string balance = "none";
  int balance_window = 1;

  bool uses_shards() const { return !shards.empty(); }
  bool packs_documents() const { return packing == "documents"; }
  bool balances() const { return balance == "wlb"; }
  // The tokenizer's vocabulary size (the token ids the data may hold).
  int vocab_size() const;
};

// Checkpoints of the run (docs/checkpoints.md): written into `dir` every `every` steps and after
// the last step; `keep_last` > 0 keeps only the newest that many; `save_initial` also saves the
// untrained parameters as step 0 when the run starts from scratch; `on_signal` makes SIGUSR1,
// SIGTERM and SIGINT "save and stop": the job stops after the step under way, saves it, and
// exits with kPreemptedExitStatus (docs/checkpoints.md, "Preemption").
struct CheckpointConfig {
  std::string dir;
  int every = 0;  // 0: only after the last step
  int keep_last = 0;
  bool save_initial = false;
  bool on_signal = true;
};

// The exit status of a run stopped by a signal after saving its checkpoint: EX_TEMPFAIL of
// sysexits.h ("a temporary failure; the user is invited to retry"), so that a scheduler's
// script can tell "preempted, resume me" (75) from success (0) and failure (other values).
inline constexpr int kPreemptedExitStatus = 75;

// Where a fresh run's parameters come from instead of the seeded initialisation (fine-tuning):
// "init": {"from": "hf:DIR"}, a Hugging Face model directory (runtime/hf_import.h). Without a
// "model" section the model is DIR's config.json; with one, the two must agree. A resumed run
// takes its parameters from the checkpoint and ignores it.
struct InitConfig {
  std::string hf_dir;
};

struct RunConfig {
  std::string source;  // the file it was read from, or "built-in default"
  spec::ModelSpec model;
  std::optional<InitConfig> init;
  TrainConfig train;
  DataConfig data;
  std::optional<CheckpointConfig> checkpoint;
  // "stragglers": the detector's settings (straggler_detector.h); absent: its defaults.
  std::optional<StragglerConfig> stragglers;

  // The run's sequence partition: train.segments cut for the model (spec::cut_sequence). The
  // pipeline plan cuts it once and carries the value; the single-process trainer is given it.
  spec::SequencePartition partition() const;
};

// Reads and validates a configuration file; every problem is an InputError naming the file
// and the field.
RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const nlohmann::json& document, const std::string& file);

// The built-in small default `plait train` uses without --config (also configs/default.json):
// a 4-layer, 128-wide byte-level GPT-2 on the fortunes corpus, a couple of minutes on 2 cores.
RunConfig default_run_config();

// The configuration as the JSON a file would hold (every field explicit).
nlohmann::json to_json(const RunConfig& config);

// "abort" / "skip".
const char* to_string(TrainConfig::OnNonFinite policy);

// A bf16 gradient reduction needs bf16 precision: the one-line reason it does not fit, or "".
// (The config reader and the CLI's overrides both check it.)
std::string grad_reduce_mismatch(const TrainConfig& train);

// The GPT-2 vocabulary size (50,000 merges + 256 bytes + <|endoftext|>).
inline constexpr int kGpt2VocabSize = 50257;

}  // namespace plait::runtime
