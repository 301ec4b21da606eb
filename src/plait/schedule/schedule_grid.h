#pragma once
// A step-by-rank grid of a schedule around one place, in the style of
// torch.distributed.pipelining's pipeline-order printout: rows are steps (positions in the
// action lists), columns are ranks, marked cells are wrapped in brackets and the failing row
// ends with "<-- ERROR HERE".
#include <string>
#include <vector>

#include "plait/schedule/schedule.h"

namespace plait::schedule {

struct GridMark {
  int rank;
  int position;
};

// Shows steps [focus - before, focus + after] and at most `max_ranks` ranks around the first
// mark's rank. The first mark is the failing one.
std::string format_grid(const Schedule& schedule, const std::vector<GridMark>& marks,
                        int before = 6, int after = 3, int max_ranks = 8);

}  // namespace plait::schedule
