#pragma once
// The flags plait sim and plait plan share for work that may outgrow the machine: --max-memory
// (refuse a run whose memory estimate exceeds it; default: the memory available now,
// core/available_memory.h) and --progress (progress_line.h).
#include <string>

#include <CLI/CLI.hpp>

#include "plait/cli/progress_line.h"

namespace plait::cli {

struct SearchFlags {
  std::string max_memory;  // "" : what the machine has available
  std::string progress = "auto";
};

void add_search_flags(CLI::App* cmd, SearchFlags& flags);

// Refuses (plait::Error, one line) when `estimate_bytes` exceeds --max-memory or, without it,
// the memory available: "<what> would hold about 99.0 GiB (<how>), more than ...; <advice>".
void check_memory_estimate(const SearchFlags& flags, double estimate_bytes, const std::string& what,
                           const std::string& how, const std::string& advice);

}  // namespace plait::cli
