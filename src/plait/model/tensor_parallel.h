#pragma once
// Tensor parallelism with sequence parallelism inside a stage (Megatron-LM's scheme: Shoeybi et
// al. 2019, arXiv 1909.08053; Korthikanti et al. 2022, arXiv 2205.05198, sec. 4.2.2), as the one
// table of splits spec/tensor_parallel_plan.h states it: every rank of a TP group of t holds its
// part of each tensor (model/parameter_layout.h lays the parts out), the residual stream and
// the norms run on the rank's sequence slice (N/t of a unit's N = batch x s rows, contiguous,
// rank i the i-th block), a column-parallel linear gathers its input over the group first, a
// row-parallel one reduce-scatters its partial output (in fp32) back to the slice.
//
// The runtime provides the group (runtime/tensor_parallel_group.h, over its transport); the
// blocks and the stage model only call these collectives, in the same order on every rank of
// the group (they run the same program on the same units). A stage without tensor parallelism
// has no group and every op below is the plain kernel call, bit for bit the engine without it.
#include <cstddef>
#include <initializer_list>

#include "plait/core/dtype.h"
#include "plait/kernels/backend.h"
#include "plait/model/tensor_pool.h"

namespace plait::model {

class TensorParallelGroup {
 public:
  virtual ~TensorParallelGroup() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // data: size() blocks of `block` elements (fp32 or bf16), this rank's block at index rank()
  // filled; on return every block holds its rank's (all-gather, in place).
  virtual void all_gather(TypedPtr data, std::size_t block) = 0;
  // data: size() blocks of `block` fp32 partial values; on return this rank's block holds the
  // sum over the group of every rank's block at its index (reduce-scatter, in place; the other
  // blocks are left undefined). The sum is formed the same way on every rank of the group.
  virtual void reduce_scatter(float* data, std::size_t block) = 0;
  // Element-wise over the group, in place; the same result on every rank.
  virtual void all_reduce_sum(float* data, std::size_t n) = 0;
  virtual void all_reduce_sum(double* data, std::size_t n) = 0;
  virtual void all_reduce_max(float* data, std::size_t n) = 0;
};

// The collective steps of a block in activation type T (float or bf16), over an optional group.
// Communication buffers come from the stage's pool, category comm_buffers, and are released as
// soon as a step is done (spec::UnitMemory::communication: at most one at a time).
template <typename T>
class TensorParallelOps {
 public:
  TensorParallelOps(TensorParallelGroup* group, kernels::Backend& backend) : group_(group), backend_(backend) {}

  int size() const { return group_ ? group_->size() : 1; }
  int rank() const { return group_ ? group_->rank() : 0; }
  bool active() const { return size() > 1; }
  TensorParallelGroup* group() const { return group_; }

  // The whole (n, c) of a sequence-sharded (n/t, c) tensor: the slice itself without TP, else
  // `hold` (a comm buffer) gathered over the group.
  const T* gather(PooledBuffer& hold, const T* slice, int n, int c, TensorPool& pool) const;

  // A row-parallel linear: out (n/t, oc) = sum over the group of inp (n, c) @ weight (oc, c)^T,
  // + bias (oc) + residual (n/t, oc) (either may be null), one rounding; without TP the plain
  // matmul_forward(out, inp, weight, bias, residual, n, c, oc).
  void row_parallel_forward(T* out, const T* inp, const T* weight, const T* bias, const T* residual,
                            int n, int c, int oc, TensorPool& pool) const;

  // A column-parallel linear's input gradient: din (n/t, c) = sum over the group of the sum over
  // `parts` of dout (n, oc) @ weight (oc, c), one rounding; without TP the plain
  // matmul_backward_input of the first part, then accumulating the others.
  struct Part {
    const T* dout;
    const T* weight;
    int oc;
  };
  void column_parallel_backward_input(T* din, std::initializer_list<Part> parts, int n, int c,
                                      TensorPool& pool) const;

  // The reduce-scattered partial sums `sum` (this rank's block of n/t rows, fp32) + bias +
  // residual, rounded into out (n/t, c).
  void finish(T* out, PooledBuffer& sum, const T* bias, const T* residual, int n, int c) const;

 private:
  TensorParallelGroup* group_;
  kernels::Backend& backend_;
};

}  // namespace plait::model
