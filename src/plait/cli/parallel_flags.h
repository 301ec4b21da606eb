#pragma once
// The layout and schedule flags `plait train`, `plait profile` and `plait bench runtime` share
// with `plait sim` (same names): --pp, --dp, --tp (one degree), --schedule, --chunks,
// --microbatches, --segments, --split, and --recompute (both forms). Given flags override the config's "parallel" and "train" sections (the generated form
// of docs/config.md; an explicit-form config cannot be combined with layout flags).
#include <string>

#include <CLI/CLI.hpp>

#include "plait/runtime/parallel_config.h"

namespace plait::cli {

// As given on the command line ("" when absent); apply_parallel_flags checks the numbers with
// the same rule as plait sim (flag_values.h).
struct ParallelFlags {
  std::string pp, dp, chunks, microbatches, segments, tp;
  std::string schedule, split;
  std::string recompute;  // "none", "full", "N" or "n0,n1,..." (parallel.recompute)
};

void add_parallel_flags(CLI::App* cmd, ParallelFlags& flags);

// The text of a recompute flag ("none", "full", "N" or "n0,n1,..."), as parallel.recompute reads
// it; errors name `flag`.
spec::Recompute parse_recompute_flag(const std::string& flag, const std::string& text);

// Applies the flags that were given; errors name the flag.
void apply_parallel_flags(const ParallelFlags& flags, runtime::JobConfig& job);

}  // namespace plait::cli
