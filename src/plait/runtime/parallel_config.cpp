#include "plait/runtime/parallel_config.h"

#include <string>

#include "plait/core/json_fields.h"
#include "plait/schedule/sequence_partition.h"

namespace plait::runtime {

int JobConfig::global_microbatches() const {
  return parallel.form == ParallelConfig::Form::generated ? parallel.dp * run.train.microbatches
                                                          : run.train.microbatches;
}

TrainConfig JobConfig::global_train() const {
  TrainConfig t = run.train;
  t.microbatches = global_microbatches();
  const int k = static_cast<int>(t.segments().size());
  if (parallel.split == "flops" && k > 1) {
    const schedule::ModelShape shape{run.model.layers, run.model.hidden, run.model.heads,
                                     run.model.vocab, run.model.max_seq};
    const schedule::SequencePartition partition = schedule::flops_partition(shape, t.seq, k);
    t.segment_lengths.assign(partition.lengths.begin(), partition.lengths.end());
  }
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
  const nlohmann::json& train = document.at("train");
  job.segments_from_count = train.contains("segments") && train.at("segments").is_number();
  if (!job.parallel.split.empty() && train.contains("segments") && !job.segments_from_count) {
    throw InputError(file, "parallel.split",
                     "applies when train.segments is a count; train.segments gives the lengths");
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
