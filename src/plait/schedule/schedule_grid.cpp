#include "plait/schedule/schedule_grid.h"

#include <algorithm>
#include <cstdio>

namespace plait::schedule {

std::string format_grid(const Schedule& schedule, const std::vector<GridMark>& marks, int before,
                        int after, int max_ranks) {
  if (marks.empty() || schedule.num_ranks() == 0) return {};
  const GridMark focus = marks.front();
  const int ranks = schedule.num_ranks();
  const int shown = std::min(ranks, max_ranks);
  const int first_rank = std::clamp(focus.rank - shown / 2, 0, ranks - shown);
  std::size_t longest = 0;
  for (const auto& actions : schedule.ranks) longest = std::max(longest, actions.size());
  const int first_step = std::max(0, focus.position - before);
  const int last_step = std::min(static_cast<int>(longest) - 1, focus.position + after);
  const bool with_chunk = schedule.layout.max_chunks() > 1;

  auto marked = [&](int r, int step) {
    return std::any_of(marks.begin(), marks.end(),
                       [&](const GridMark& m) { return m.rank == r && m.position == step; });
  };
  const int width = with_chunk ? 12 : 10;
  std::string out = "          ";
  for (int r = first_rank; r < first_rank + shown; ++r) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "%-*s", width, ("Rank " + std::to_string(r)).c_str());
    out += cell;
  }
  if (first_rank + shown < ranks || first_rank > 0) {
    out += "(ranks " + std::to_string(first_rank) + ".." + std::to_string(first_rank + shown - 1) +
           " of " + std::to_string(ranks) + ")";
  }
  out += '\n';
  for (int step = first_step; step <= last_step; ++step) {
    char label[32];
    std::snprintf(label, sizeof label, "Step %03d: ", step);
    out += label;
    for (int r = first_rank; r < first_rank + shown; ++r) {
      const auto& actions = schedule.ranks[r];
      std::string text;
      if (step < static_cast<int>(actions.size())) text = to_string(actions[step], with_chunk);
      if (marked(r, step)) text = "[" + text + "]";
      char cell[48];
      std::snprintf(cell, sizeof cell, "%-*s", width, text.c_str());
      out += cell;
    }
    if (step == focus.position) out += "<-- ERROR HERE (rank " + std::to_string(focus.rank) + ")";
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  }
  return out;
}

}  // namespace plait::schedule
