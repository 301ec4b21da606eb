#pragma once
// Small reports from every rank to every rank (run summaries, timelines): each rank's doubles
// are placed in its own slot of a zero array and the array is summed over the job, which is a
// gather built from the one collective the transport has for doubles. Meant for kilobytes, not
// tensors.
#include <span>
#include <vector>

#include "plait/comm/communicator.h"

namespace plait::runtime {

// result[r] = rank r's `values`; lengths may differ between ranks. Collective over `group`.
std::vector<std::vector<double>> gather_all(comm::Communicator& group, std::span<const double> values);

}  // namespace plait::runtime
