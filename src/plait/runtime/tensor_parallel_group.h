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
  // time alone is (device_emulator.h: its thread's CPU time when below its wall time).
  double link_seconds() const { return link_seconds_; }

  comm::Communicator& communicator() { return group_; }

 private:
  // Runs one collective and adds its time alone (min of wall and thread CPU time) to the count.
  template <typename Run>
  void timed(const Run& run);

  comm::Communicator& group_;
  double link_seconds_ = 0;
};

}  // namespace plait::runtime
