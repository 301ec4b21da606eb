#include "plait/runtime/tensor_parallel_group.h"

#include <algorithm>
#include <span>
#include <vector>

#include "plait/core/monotonic_clock.h"
#include "plait/core/thread_cpu_clock.h"

namespace plait::runtime {

template <typename Run>
void CommTensorParallelGroup::timed(const Run& run) {
  const double t0 = monotonic_seconds(), cpu0 = thread_cpu_seconds();
  run();
  // The waits back off with sleeps (comm/backoff.h), so a wait for a partner that has no core
  // costs CPU time only for its polls: the CPU time is what the collective itself took.
  link_seconds_ += std::min(monotonic_seconds() - t0, thread_cpu_seconds() - cpu0);
}

void CommTensorParallelGroup::all_gather(TypedPtr data, std::size_t block) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), block);
  const std::size_t n = block * counts.size();
  timed([&] {
    if (data.dtype == DType::bf16) {
      group_.iallgather(std::span<bf16>(data.as<bf16>(), n), counts).wait();
    } else {
      group_.iallgather(std::span<float>(data.as<float>(), n), counts).wait();
    }
  });
}

void CommTensorParallelGroup::reduce_scatter(float* data, std::size_t block) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), block);
  timed([&] {
    group_.ireduce_scatter(std::span<float>(data, block * counts.size()), counts, comm::ReduceOp::kSum).wait();
  });
}

void CommTensorParallelGroup::all_reduce_sum(float* data, std::size_t n) {
  timed([&] { group_.allreduce(std::span<float>(data, n), comm::ReduceOp::kSum); });
}

void CommTensorParallelGroup::all_reduce_sum(double* data, std::size_t n) {
  timed([&] { group_.allreduce(std::span<double>(data, n), comm::ReduceOp::kSum); });
}

void CommTensorParallelGroup::all_reduce_max(float* data, std::size_t n) {
  timed([&] { group_.allreduce(std::span<float>(data, n), comm::ReduceOp::kMax); });
}

}  // namespace plait::runtime
