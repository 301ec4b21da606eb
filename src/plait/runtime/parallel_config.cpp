#include "plait/runtime/parallel_config.h"

#include <string>

#include "plait/core/json_fields.h"

namespace plait::runtime {

int JobConfig::global_microbatches() const {
  return parallel.form == ParallelConfig::Form::generated ? parallel.dp * run.train.microbatches
                                                          : run.train.microbatches;
}

TrainConfig JobConfig::global_train() const {
  TrainConfig t = run.train;
  t.microbatches = global_microbatches();
  return t;
}

JobConfig parse_job_config(const nlohmann::json& document, const std::string& file) {
  JobConfig job;
  if (!document.is_object()) {
    throw InputError(file, "(top level)", "expected an object with sections model, train, data, parallel");
  }
  // The model/train/data sections are train_config's; "parallel" is read here.
  nlohmann::json rest = document;
  rest.erase("parallel");
  job.run = parse_run_config(rest, file);
  if (document.contains("parallel")) {
    const JsonFields top(document, file);
    job.parallel = schedule::parse_parallel_spec(top.object("parallel"));
  }
  spec::SegmentRequest& segments = job.run.train.segments;
  if (!job.parallel.split.empty()) {
    if (segments.explicit_lengths()) {
      throw InputError(file, "parallel.split",
                       "applies when train.segments is a count; train.segments gives the lengths");
    }
    segments.split = spec::parse_split_method(job.parallel.split);
  }
  return job;
}

JobConfig load_job_config(const std::string& path) {
  return parse_job_config(read_json_file(path), path);
}

JobConfig job_from_run_config(RunConfig run) {
  JobConfig job;
  job.run = std::move(run);
  return job;
}

}  // namespace plait::runtime
