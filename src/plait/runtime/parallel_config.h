#pragma once
// The "parallel" section of a plait config (and of a plan file written by `plait plan`): how the
// model is cut into virtual stages, which rank holds which, the schedule every rank runs, and
// optional per-rank device emulation. The contract between the runtime and the planner is
// /work/notes/parallel-contract.md; docs/config.md documents every field.
//
// Two forms, told apart by their fields:
//   generated (homogeneous): {"schedule", "pp", "dp", "chunks", "layers", "split"}: a schedule
//     family generates one pipeline of pp ranks over m = train.microbatches micro-batches;
//     schedule::replicate makes dp copies (rank = replica * pp + pipeline rank).
//   explicit (heterogeneous): {"rank_vstages", "layers", "schedule_text", "schedule_name"}: the
//     layout and every rank's action list are given; train.microbatches is the GLOBAL count M.
// Both may carry "devices": one {"type", "slowdown", "memory_bytes"} per rank.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/core/json_fields.h"
#include "plait/runtime/train_config.h"

namespace plait::runtime {

// A device a rank pretends to be (issue 5.3): its compute takes `slowdown` times as long (padded
// by timed sleeps) and its memory accounting has `memory_bytes` capacity.
struct DeviceEmulation {
  std::string type = "host";
  double slowdown = 1.0;                    // >= 1
  std::optional<std::size_t> memory_bytes;  // none: unlimited
};

struct ParallelConfig {
  enum class Form { generated, explicit_layout };
  Form form = Form::generated;

  // Generated form.
  std::string schedule = "seq1f1b";  // a schedule family name (schedule_family.h)
  int pp = 1;
  int dp = 1;
  int chunks = 0;  // 0: the family's fixed value (1, or 2 for zb-v; interleaved families need it)
  // Segment lengths when train.segments is a count: "even" (train's default) or "flops" (equal
  // forward FLOPs per segment, Seq1F1B's computation-wise partition). Empty: not given.
  std::string split;

  // Explicit form.
  std::vector<std::vector<int>> rank_vstages;
  std::vector<std::string> schedule_text;
  std::string schedule_name;

  // Both: layers per virtual stage (empty in the generated form: as even as possible).
  std::vector<int> layers;
  // One per rank, or empty (no emulation).
  std::vector<DeviceEmulation> devices;

  // Ranks the layout needs: pp * dp, or rank_vstages.size().
  int world_size() const;
};

// Reads the section strictly (InputErrors name the file and field, e.g.
// "plan.json: parallel.rank_vstages[2]: expected at least one virtual stage").
ParallelConfig parse_parallel_config(const JsonFields& section);

// A whole config file: model/train/data (train_config.h) plus "parallel". `train` is as the file
// says it; for the generated form train.microbatches counts micro-batches per replica.
struct JobConfig {
  RunConfig run;
  ParallelConfig parallel;
  // True when train.segments was given as a count (so "split" may re-cut it).
  bool segments_from_count = false;

  // Micro-batches in the global batch: dp * train.microbatches (generated) or
  // train.microbatches (explicit).
  int global_microbatches() const;
  // The train section for the whole global batch: microbatches = global_microbatches(), and the
  // segment lengths the split asks for. This is what runtime::LocalTrainer must run to be the
  // single-process reference of the job.
  TrainConfig global_train() const;
};

JobConfig load_job_config(const std::string& path);
JobConfig parse_job_config(const nlohmann::json& document, const std::string& file);
// A job from a RunConfig and no "parallel" section (one rank, the default schedule).
JobConfig job_from_run_config(RunConfig run);

// The section as JSON (the form it is in), for plan files and `--print-config`.
nlohmann::json to_json(const ParallelConfig& parallel);

}  // namespace plait::runtime
