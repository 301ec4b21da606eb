#include "plait/runtime/tensor_parallel_group.h"

#include <algorithm>
#include <span>
#include <vector>

#include "plait/comm/backoff.h"
#include "plait/comm/request.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"
#include "plait/core/thread_cpu_clock.h"

namespace plait::runtime {

template <typename Start>
void CommTensorParallelGroup::timed(const Start& start) {
  const double t0 = monotonic_seconds(), cpu0 = thread_cpu_seconds();
  comm::Request request = start();
  // Request::wait's loop, with the CPU time of its pauses measured. A rank that reaches the
  // collective before its partner waits for it, its polls backing off with yields and sleeps
  // (comm/backoff.h); on cores shared with other ranks each pause is a system call and a switch
  // away and back, which the thread's CPU time counts. That is waiting, which the action's wall
  // time already holds, not the collective's work. Counted as link (unstretched, but on the
  // action's time), the bench's TP 2 x PP 2 rows measured 1.2-5.5 ms of link per action at
  // 17-33 collectives against 0.6-1.7 ms without the pauses (2026-12-05, the ring model charging
  // 0.2-0.5 ms). The polls themselves (the transport's progress and copies) stay counted.
  double paused = 0;
  if (!request.test()) {
    note_waiting(request.describe());
    comm::Backoff backoff(request.backoff_policy());
    while (!request.test()) {
      const double before = thread_cpu_seconds();
      backoff.pause();
      paused += thread_cpu_seconds() - before;
    }
    note_wait_over();
  }
  link_seconds_ += std::max(0.0, std::min(monotonic_seconds() - t0, thread_cpu_seconds() - cpu0 - paused));
  paused_seconds_ += paused;
}

void CommTensorParallelGroup::all_gather(TypedPtr data, std::size_t block) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), block);
  const std::size_t n = block * counts.size();
  timed([&] {
    return data.dtype == DType::bf16 ? group_.iallgather(std::span<bf16>(data.as<bf16>(), n), counts)
                                     : group_.iallgather(std::span<float>(data.as<float>(), n), counts);
  });
}

void CommTensorParallelGroup::reduce_scatter(float* data, std::size_t block) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), block);
  timed([&] { return group_.ireduce_scatter(std::span<float>(data, block * counts.size()), counts, comm::ReduceOp::kSum); });
}

void CommTensorParallelGroup::all_reduce_sum(float* data, std::size_t n) {
  timed([&] { return group_.iallreduce(std::span<float>(data, n), comm::ReduceOp::kSum); });
}

void CommTensorParallelGroup::all_reduce_sum(double* data, std::size_t n) {
  timed([&] { return group_.iallreduce(std::span<double>(data, n), comm::ReduceOp::kSum); });
}

void CommTensorParallelGroup::all_reduce_max(float* data, std::size_t n) {
  timed([&] { return group_.iallreduce(std::span<float>(data, n), comm::ReduceOp::kMax); });
}

}  // namespace plait::runtime
