#include "plait/cli/parallel_flags.h"

#include <algorithm>

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
  cmd->add_option("--tp", f.tp,
                  "Tensor-parallel degree t of every stage (parallel.tp): each pipeline rank becomes\n"
                  "t consecutive MPI ranks splitting every layer (Megatron-LM's tensor and sequence\n"
                  "parallelism); world size = pp x dp x t; t must divide heads, kv_heads, ffn_hidden\n"
                  "and every segment's tokens")
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
  cmd->add_option("--recompute", f.recompute,
                  "Activation recomputation (parallel.recompute): none, full, N (the first N\n"
                  "layers of every virtual stage) or n0,n1,... (one count per virtual stage)")
      ->type_name("WHAT")
      ->group("Layout (override the config's parallel section)");
}

spec::Recompute parse_recompute_flag(const std::string& flag, const std::string& text) {
  if (text == "none") return {};
  if (text == "full") return spec::Recompute::full();
  // The text as the JSON value parallel.recompute takes.
  nlohmann::json counts = nlohmann::json::array();
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    if (item.empty() || item.size() > 7 || item.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(flag + ": expected none, full, a number of layers per stage or one count per "
                  "virtual stage separated by commas, found '" + text + "'");
    }
    counts.push_back(std::stoi(item));
    at = comma + 1;
  }
  return schedule::parse_recompute(counts.size() == 1 ? counts[0] : counts, flag, "value");
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
    spec::SegmentRequest& r = job.run.train.segments;
    r.lengths.clear();
    r.count = segments;
  }
  if (!f.split.empty()) {
    if (job.run.train.segments.explicit_lengths()) {
      throw Error("--split: train.segments gives explicit lengths; give --segments K to re-cut");
    }
    p.split = f.split;
    job.run.train.segments.split = spec::parse_split_method(f.split);
  }
  if (!f.recompute.empty()) p.recompute = parse_recompute_flag("--recompute", f.recompute);
  if (!f.tp.empty()) p.tp = {number("--tp", f.tp, 8)};
  if (!p.devices.empty() && static_cast<int>(p.devices.size()) != p.world_size()) {
    throw Error("--pp/--dp: " + std::to_string(p.world_size()) + " ranks, but parallel.devices lists " +
                std::to_string(p.devices.size()));
  }
}

}  // namespace plait::cli
