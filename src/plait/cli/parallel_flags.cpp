#include "plait/cli/parallel_flags.h"

#include "plait/cli/flag_values.h"
#include "plait/core/error.h"
#include "plait/schedule/schedule_family.h"

namespace plait::cli {

void add_parallel_flags(CLI::App* cmd, ParallelFlags& f) {
  cmd->add_option("--schedule", f.schedule,
                  "Schedule family (overrides parallel.schedule): " +
                      schedule::schedule_family_names())
      ->group("Layout (override the config's parallel section)");
  cmd->add_option("--pp", f.pp, "Pipeline ranks per replica (parallel.pp)")
      ->type_name("INT")
      ->group("Layout (override the config's parallel section)");
  cmd->add_option("--dp", f.dp, "Data-parallel replicas (parallel.dp); world size = pp x dp")
      ->type_name("INT")
      ->group("Layout (override the config's parallel section)");
  cmd->add_option("--chunks", f.chunks,
                  "Model chunks per rank v for interleaved and seq1f1b-i (parallel.chunks;\n"
                  "zb-v always uses 2, the others 1)")
      ->type_name("INT")
      ->group("Layout (override the config's parallel section)");
  cmd->add_option("--microbatches", f.microbatches,
                  "Micro-batches per step m of each replica (train.microbatches)")
      ->type_name("INT")
      ->group("Layout (override the config's parallel section)");
  cmd->add_option("--segments", f.segments,
                  "Sequence segments k per micro-batch (train.segments as a count); k > 1 needs a\n"
                  "sequence-level schedule: seq1f1b, seq1f1b-i or seq-zb")
      ->type_name("INT")
      ->group("Layout (override the config's parallel section)");
  cmd->add_option("--split", f.split,
                  "Segment lengths: even, or flops (equal forward FLOPs per segment, Seq1F1B's\n"
                  "computation-wise partition) (parallel.split)")
      ->check(CLI::IsMember({"even", "flops"}))
      ->group("Layout (override the config's parallel section)");
}

void apply_parallel_flags(const ParallelFlags& f, runtime::JobConfig& job) {
  runtime::ParallelConfig& p = job.parallel;
  // The limits of the config's fields (docs/config.md); 0: the flag was not given.
  const auto number = [](const char* flag, const std::string& text, std::int64_t max) {
    return text.empty() ? 0 : static_cast<int>(positive_flag(flag, text, max));
  };
  const int pp = number("--pp", f.pp, 1 << 16), dp = number("--dp", f.dp, 1 << 16);
  const int chunks = number("--chunks", f.chunks, 64);
  const int microbatches = number("--microbatches", f.microbatches, 1 << 16);
  const int segments = number("--segments", f.segments, 1 << 20);
  const bool layout_flags = pp > 0 || dp > 0 || chunks > 0 || !f.schedule.empty() || !f.split.empty();
  if (layout_flags && p.form == runtime::ParallelConfig::Form::explicit_layout) {
    throw Error(job.run.source + ": parallel: the section is in the explicit form (rank_vstages, "
                "schedule_text); --pp, --dp, --schedule, --chunks and --split apply to the generated form");
  }
  if (!f.schedule.empty()) {
    if (schedule::find_schedule_family(f.schedule) == nullptr) {
      throw Error("--schedule: unknown schedule '" + f.schedule + "'; expected one of " +
                  schedule::schedule_family_names());
    }
    p.schedule = f.schedule;
  }
  if (pp > 0) p.pp = pp;
  if (dp > 0) p.dp = dp;
  if (chunks > 0) p.chunks = chunks;
  if (microbatches > 0) job.run.train.microbatches = microbatches;
  if (segments > 0) {
    if (segments > job.run.train.seq) {
      throw Error("--segments: " + std::to_string(segments) + " segments of a " +
                  std::to_string(job.run.train.seq) + "-token sequence");
    }
    job.run.train.segment_lengths.clear();
    if (segments > 1) {
      for (const model::Segment& s : model::even_segments(job.run.train.seq, segments)) {
        job.run.train.segment_lengths.push_back(s.length);
      }
    }
    job.segments_from_count = true;
  }
  if (!f.split.empty()) {
    if (!job.segments_from_count && !job.run.train.segment_lengths.empty()) {
      throw Error("--split: train.segments gives explicit lengths; give --segments K to re-cut");
    }
    p.split = f.split;
  }
  if (!p.devices.empty() && static_cast<int>(p.devices.size()) != p.world_size()) {
    throw Error("--pp/--dp: " + std::to_string(p.world_size()) + " ranks, but parallel.devices lists " +
                std::to_string(p.devices.size()));
  }
}

}  // namespace plait::cli
