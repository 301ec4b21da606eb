#pragma once
// How far a long search has got, for the user: plait sim (the phases of a simulation, the
// schedules of --compare) and plait plan (the planner's passes) call it as they go, and the
// command shows it on stderr (cli/progress_line.h) once the search has run for a few seconds.
// Not the stall watchdog's board (progress.h), which only another rank reads.
#include <cstdint>
#include <functional>
#include <string>

namespace plait {

// `what`: the pass under way ("simulating zb-v: lowering"); `done` of its `total` items are
// finished. Empty: nobody is listening.
using SearchProgress = std::function<void(const std::string& what, std::int64_t done, std::int64_t total)>;

inline void report(const SearchProgress& progress, const std::string& what, std::int64_t done, std::int64_t total) {
  if (progress) progress(what, done, total);
}

}  // namespace plait
