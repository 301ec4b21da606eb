#pragma once
// A stage's tensor-parallel group (model/tensor_parallel.h) over the job's transport: the TP
// ranks of one pipeline rank, consecutive ranks of the job (one machine, where the fast links
// are: Megatron-LM's ordering, TP innermost). Each collective is the transport's nonblocking one
// waited for at once (the stage's F, B and W need its result to go on). It counts the time its
// collectives take (link_seconds), which an emulated slow device does not stretch: the device
// computes f times slower, the machine's link between TP ranks is not the device.
#include <cstddef>

#include "plait/comm/communicator.h"
#include "plait/model/tensor_parallel.h"

namespace plait::runtime {

class CommTensorParallelGroup : public model::TensorParallelGroup {
 public:
  explicit CommTensorParallelGroup(comm::Communicator& group) : group_(group) {}

  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  void all_gather(TypedPtr data, std::size_t block) override;
  void reduce_scatter(float* data, std::size_t block) override;
  void all_reduce_sum(float* data, std::size_t n) override;
  void all_reduce_sum(double* data, std::size_t n) override;
  void all_reduce_max(float* data, std::size_t n) override;
  // Seconds this rank has spent in the group's collectives so far, each counted as a device's
  // time alone is (device_emulator.h: its thread's CPU time when below its wall time), less the
  // pauses of its wait (comm/backoff.h): what a collective costs while its partners are there.
  double link_seconds() const { return link_seconds_; }
  // The thread's CPU time spent in those pauses so far: neither the device's compute nor the
  // link's, so an action's time alone leaves it out (pipeline_executor.cpp).
  double paused_seconds() const { return paused_seconds_; }

  comm::Communicator& communicator() { return group_; }

 private:
  // Starts one collective (`start` returns its request), waits for it, and adds its time alone
  // (min of wall and thread CPU time, the wait's pauses left out) to the count.
  template <typename Start>
  void timed(const Start& start);

  comm::Communicator& group_;
  double link_seconds_ = 0;
  double paused_seconds_ = 0;
};

}  // namespace plait::runtime
