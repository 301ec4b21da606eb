// Fuzzes the whole run/job config `plait train --config` reads (runtime::parse_job_config: the
// model, train, data, checkpoint and parallel sections, both forms of the parallel section incl.
// explicit schedule text and devices). A config it accepts must:
//   - read back from the JSON a checkpoint records for it (TrainingRun::config_json) to the same
//     JSON, since `plait train --resume DIR` runs that copy;
//   - when small enough to build quickly, give a pipeline plan (schedule generation or the
//     explicit lists, layer split, segments, schedule validation incl. the deadlock check) or a
//     plait::Error saying why not, as every rank does before training.
// Anything but a plait::Error is a finding.
#include <cstdint>
#include <string_view>

#include "fuzz_input_file.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/training_run.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::runtime;
  static plait::fuzz::InputFile file;
  JobConfig job;
  try {
    job = load_job_config(file.write(data, size));
  } catch (const plait::Error&) {
    return 0;
  }
  const nlohmann::json written = TrainingRun::config_json(job);
  try {
    const JobConfig again = parse_job_config(written, "checkpoint-config.json");
    if (TrainingRun::config_json(again) != written) __builtin_trap();
  } catch (const plait::Error&) {
    __builtin_trap();  // plait wrote a config it cannot read back
  }
  // Plans of a bounded size only (generation and validation grow with ranks x micro-batches x
  // segments x stages); the runtime builds any size.
  const auto& t = job.run.train;
  const int world = job.parallel.world_size();
  if (world > 16 || job.global_microbatches() > 64 || t.segments.segments() > 8 ||
      job.run.model.layers > 64 || static_cast<long>(job.parallel.chunks) * world > 64) {
    return 0;
  }
  try {
    const PipelinePlan plan = build_pipeline_plan(job, world);
    if (plan.num_ranks() != world || plan.num_vstages() < 1) __builtin_trap();
  } catch (const plait::Error&) {
  }
  return 0;
}
