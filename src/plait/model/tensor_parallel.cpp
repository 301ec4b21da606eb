#include "plait/model/tensor_parallel.h"

#include "plait/core/memory_category.h"

namespace plait::model {

template <typename T>
const T* TensorParallelOps<T>::gather(PooledBuffer& hold, const T* slice, int n, int c, TensorPool& pool) const {
  if (!active()) return slice;
  const std::size_t block = static_cast<std::size_t>(n / size()) * c;
  hold = pool.acquire_as<T>(MemoryCategory::kCommBuffers, block * size());
  T* full = hold.template as<T>();
  backend_.copy(full + block * rank(), slice, block * sizeof(T), CopyKind::kDeviceToDevice);
  group_->all_gather(TypedPtr(full), block);
  return full;
}

template <typename T>
void TensorParallelOps<T>::finish(T* out, PooledBuffer& sum, const T* bias, const T* residual, int n, int c) const {
  const std::size_t block = static_cast<std::size_t>(n / size()) * c;
  group_->reduce_scatter(sum.data(), block);
  backend_.add_bias_residual(out, sum.data() + block * rank(), bias, residual, n / size(), c);
  sum.reset();
}

template <typename T>
void TensorParallelOps<T>::row_parallel_forward(T* out, const T* inp, const T* weight, const T* bias,
                                                const T* residual, int n, int c, int oc, TensorPool& pool) const {
  if (!active()) {
    backend_.matmul_forward(out, inp, weight, bias, residual, n, c, oc);
    return;
  }
  PooledBuffer sum = pool.acquire(MemoryCategory::kCommBuffers, static_cast<std::size_t>(n) * oc);
  backend_.matmul_forward_partial(sum.data(), inp, weight, n, c, oc);
  finish(out, sum, bias, residual, n, oc);
}

template <typename T>
void TensorParallelOps<T>::column_parallel_backward_input(T* din, std::initializer_list<Part> parts, int n, int c,
                                                          TensorPool& pool) const {
  if (!active()) {
    bool accumulate = false;
    for (const Part& p : parts) {
      backend_.matmul_backward_input(din, p.dout, p.weight, n, c, p.oc, accumulate);
      accumulate = true;
    }
    return;
  }
  PooledBuffer sum = pool.acquire(MemoryCategory::kCommBuffers, static_cast<std::size_t>(n) * c);
  bool accumulate = false;
  for (const Part& p : parts) {
    backend_.matmul_backward_input_partial(sum.data(), p.dout, p.weight, n, c, p.oc, accumulate);
    accumulate = true;
  }
  finish(din, sum, nullptr, nullptr, n, c);
}

template class TensorParallelOps<float>;
template class TensorParallelOps<bf16>;

}  // namespace plait::model
