#include "plait/runtime/tensor_parallel_group.h"

#include <span>
#include <vector>

namespace plait::runtime {

void CommTensorParallelGroup::all_gather(TypedPtr data, std::size_t block) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), block);
  const std::size_t n = block * counts.size();
  if (data.dtype == DType::bf16) {
    group_.iallgather(std::span<bf16>(data.as<bf16>(), n), counts).wait();
  } else {
    group_.iallgather(std::span<float>(data.as<float>(), n), counts).wait();
  }
}

void CommTensorParallelGroup::reduce_scatter(float* data, std::size_t block) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), block);
  group_.ireduce_scatter(std::span<float>(data, block * counts.size()), counts, comm::ReduceOp::kSum).wait();
}

void CommTensorParallelGroup::all_reduce_sum(float* data, std::size_t n) {
  group_.allreduce(std::span<float>(data, n), comm::ReduceOp::kSum);
}

void CommTensorParallelGroup::all_reduce_sum(double* data, std::size_t n) {
  group_.allreduce(std::span<double>(data, n), comm::ReduceOp::kSum);
}

void CommTensorParallelGroup::all_reduce_max(float* data, std::size_t n) {
  group_.allreduce(std::span<float>(data, n), comm::ReduceOp::kMax);
}

}  // namespace plait::runtime
