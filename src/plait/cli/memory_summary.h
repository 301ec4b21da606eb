#pragma once
// The "peak memory by category" table that `plait train` and `plait bench engine` print.
#include <cstdio>

#include "plait/core/memory_tracker.h"

namespace plait::cli {

void print_memory_summary(std::FILE* out, const MemoryReport& report);

}  // namespace plait::cli
