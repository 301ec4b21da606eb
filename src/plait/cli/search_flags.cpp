#include "plait/cli/search_flags.h"

#include <algorithm>

#include "plait/cli/byte_size.h"
#include "plait/core/available_memory.h"
#include "plait/core/error.h"
#include "plait/core/memory_tracker.h"

namespace plait::cli {

void add_search_flags(CLI::App* cmd, SearchFlags& flags) {
  cmd->add_option("--max-memory", flags.max_memory,
                  "Refuse to start when the run's memory estimate (stated in the refusal) exceeds\n"
                  "SIZE (e.g. 8GiB); default: the memory the machine (or its cgroup) has available")
      ->type_name("SIZE");
  cmd->add_option("--progress", flags.progress,
                  "Progress on stderr: auto (once the search has run for 2 s), always, never")
      ->type_name("WHEN")
      ->capture_default_str();
}

void check_memory_estimate(const SearchFlags& flags, double estimate_bytes, const std::string& what,
                           const std::string& how, const std::string& advice) {
  std::string limit_text;
  double limit = 0;
  if (!flags.max_memory.empty()) {
    limit = static_cast<double>(parse_byte_size("--max-memory", flags.max_memory));
    limit_text = "the " + format_bytes(static_cast<std::size_t>(limit)) + " of --max-memory";
  } else if (const std::optional<AvailableMemory> available = available_memory()) {
    limit = static_cast<double>(available->bytes);
    limit_text = "the " + format_bytes(available->bytes) + " this machine has available (" + available->source +
                 "; --max-memory sets another limit)";
  } else {
    return;  // nothing to compare with
  }
  if (estimate_bytes <= limit) return;
  throw Error(what + " would hold about " + format_bytes(static_cast<std::size_t>(std::min(estimate_bytes, 1.8e19))) +
              " (" + how + "), more than " + limit_text + "; " + advice);
}

}  // namespace plait::cli
