#pragma once
// A whole plait config (and plan file): the model/train/data sections of train_config.h plus the
// "parallel" section, whose type, strict reader and JSON writer are schedule::ParallelSpec's
// (schedule/parallel_spec.h: the planner reads and writes the section too). docs/config.md ("parallel")
// documents every field of the contract between the runtime and the planner.
#include <string>

#include <nlohmann/json.hpp>

#include "plait/runtime/train_config.h"
#include "plait/schedule/parallel_spec.h"

namespace plait::runtime {

// The runtime's names for the section, its devices and its JSON writer.
using ParallelConfig = schedule::ParallelSpec;
using DeviceEmulation = schedule::DeviceEmulation;
using schedule::to_json;

// A whole config file: model/train/data (train_config.h) plus "parallel". `train` is as the file
// says it (its segment request carries parallel.split's method); for the generated form
// train.microbatches counts micro-batches per replica.
struct JobConfig {
  RunConfig run;
  ParallelConfig parallel;

  // Micro-batches in the global batch: dp * train.microbatches (generated) or
  // train.microbatches (explicit).
  int global_microbatches() const;
  // The train section for the whole global batch: microbatches = global_microbatches(). With
  // run.partition() this is what runtime::LocalTrainer must run to be the single-process
  // reference of the job.
  TrainConfig global_train() const;
};

JobConfig load_job_config(const std::string& path);
JobConfig parse_job_config(const nlohmann::json& document, const std::string& file);
// A job from a RunConfig and no "parallel" section (one rank, the default schedule).
JobConfig job_from_run_config(RunConfig run);

}  // namespace plait::runtime
