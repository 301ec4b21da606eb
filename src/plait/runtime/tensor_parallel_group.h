#pragma once
// A stage's tensor-parallel group (model/tensor_parallel.h) over the job's transport: the TP
// ranks of one pipeline rank, consecutive ranks of the job (one machine, where the fast links
// are: Megatron-LM's ordering, TP innermost). Each collective is the transport's nonblocking one
// waited for at once (the stage's F, B and W need its result to go on).
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

  comm::Communicator& communicator() { return group_; }

 private:
  comm::Communicator& group_;
};

}  // namespace plait::runtime
