#pragma once
// Plan files: the complete config `plait train` runs (docs/config.md, the
// "explicit" form of "parallel"): {"model", "train", "data", "parallel"} with
//   parallel.rank_vstages   the virtual stages of every rank (ranks = the plan's devices in
//                           cluster order: rank r runs on the r-th device the plan uses)
//   parallel.layers         layers per virtual stage
//   parallel.schedule_text  every rank's actions in the text form of docs/schedules.md, global
//                           micro-batch ids
//   parallel.schedule_name  the family
//   parallel.devices        for emulated clusters: {type, slowdown, memory_bytes} per rank
// and train.microbatches = the global number of micro-batches, train.microbatch_size,
// train.seq and train.segments (the segment lengths). Other train fields and the base config's
// other sections (data, checkpoint, stragglers, ...) come from a base config when one is given.
//
// The parallel section is written and read by schedule::ParallelSpec (schedule/parallel_spec.h),
// the reader the runtime uses, and train.segments by spec::read_segment_request.
// read_plan_file reads such a file back (and the generated form 1), for predicting a plan made
// elsewhere (e.g. an even baseline) on a cluster. It reads the fields it needs strictly; the
// runtime validates the rest when it runs the file.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "plait/plan/plan.h"

namespace plait::plan {

// `base` (may be null): a config whose "train" fields and every section besides "model", "train"
// and "parallel" are taken over.
nlohmann::json plan_file_json(const PlanningProblem& problem, const Plan& plan, const nlohmann::json* base);

struct LoadedPlan {
  spec::NamedModel model;
  std::int64_t seq = 0;
  std::int64_t global_batch = 0;  // sequences
  PlanChoice choice;              // its devices are the cluster's first ranks
  schedule::Schedule schedule;
};

// Throws InputError naming the file and field for anything malformed, an invalid schedule, or a
// cluster with fewer devices than the plan has ranks.
LoadedPlan read_plan_file(const std::string& path, const ClusterSpec& cluster);

}  // namespace plait::plan
