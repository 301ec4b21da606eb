#pragma once
// The training configuration file: {"model": {...}, "train": {...}, "data": {...}}, read
// strictly (unknown sections and fields are errors naming the file and field). The "model"
// section is model::parse_gpt_config's; the others are below. docs/config.md documents every
// field.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/model/gpt_config.h"
#include "plait/model/segment.h"

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
  // Segment lengths of each sequence (Seq1F1B); one segment of length seq by default.
  std::vector<int> segment_lengths;

  std::vector<model::Segment> segments() const;
  std::int64_t tokens_per_step() const {
    return std::int64_t{seq} * microbatch_size * microbatches;
  }
};

struct DataConfig {
  // Text files or directories (read recursively; binary files skipped), byte-level tokens.
  std::vector<std::string> paths = {"/usr/share/games/fortunes"};
};

struct RunConfig {
  std::string source;  // the file it was read from, or "built-in default"
  model::GPTConfig model;
  TrainConfig train;
  DataConfig data;
};

// Reads and validates a configuration file; every problem is an InputError naming the file
// and the field.
RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const nlohmann::json& document, const std::string& file);

// The built-in small default `plait train` uses without --config (also configs/default.json):
// a 4-layer, 128-wide byte-level GPT on the fortunes corpus, a couple of minutes on 2 cores.
RunConfig default_run_config();

// The configuration as the JSON a file would hold (every field explicit).
nlohmann::json to_json(const RunConfig& config);

}  // namespace plait::runtime
