#include "plait/comm/communicator.h"

namespace plait::comm {

double Communicator::allreduce(double value, ReduceOp op) {
  allreduce(std::span<double>(&value, 1), op);
  return value;
}

std::string Communicator::describe_members() const {
  std::string s = "ranks {";
  for (int r = 0; r < size(); ++r) {
    if (r > 0) s += ", ";
    s += std::to_string(world_rank_of(r));
  }
  return s + "}";
}

}  // namespace plait::comm
