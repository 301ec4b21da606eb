#pragma once
// Every rank's memory accounting (current and peak bytes by category, peak of the sum), gathered
// to every rank for the run summary. Collective over `world`.
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/core/memory_tracker.h"

namespace plait::runtime {

std::vector<MemoryReport> gather_memory_reports(comm::Communicator& world, const MemoryReport& mine);

}  // namespace plait::runtime
