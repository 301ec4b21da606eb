#include "plait/runtime/rank_gather.h"

#include <algorithm>

namespace plait::runtime {

std::vector<std::vector<double>> gather_all(comm::Communicator& group, std::span<const double> values) {
  const int n = group.size(), me = group.rank();
  std::vector<double> lengths(static_cast<std::size_t>(n), 0.0);
  lengths[static_cast<std::size_t>(me)] = static_cast<double>(values.size());
  group.allreduce(std::span<double>(lengths), comm::ReduceOp::kSum);
  std::vector<std::size_t> offsets(static_cast<std::size_t>(n) + 1, 0);
  for (int r = 0; r < n; ++r) {
    offsets[static_cast<std::size_t>(r) + 1] =
        offsets[static_cast<std::size_t>(r)] + static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]);
  }
  std::vector<double> all(offsets.back(), 0.0);
  std::copy(values.begin(), values.end(), all.begin() + static_cast<std::ptrdiff_t>(offsets[static_cast<std::size_t>(me)]));
  if (!all.empty()) group.allreduce(std::span<double>(all), comm::ReduceOp::kSum);
  std::vector<std::vector<double>> result(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    result[static_cast<std::size_t>(r)].assign(all.begin() + static_cast<std::ptrdiff_t>(offsets[static_cast<std::size_t>(r)]),
                                               all.begin() + static_cast<std::ptrdiff_t>(offsets[static_cast<std::size_t>(r) + 1]));
  }
  return result;
}

}  // namespace plait::runtime
