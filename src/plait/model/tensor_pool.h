#pragma once
// Working memory for activations, K/V caches and gradients of units in flight. Each block is
// charged to a MemoryTracker category while it is handed out (so accounting, peaks and the
// capacity error see exactly what the model holds); freed blocks are cached by size and handed
// out again, so a training step does not fault fresh pages in and the kernel does not have to
// zero them each step (the same idea as PyTorch's caching allocator). The blocks are the
// backend's memory (kernels/backend.h: host memory with transparent huge pages on the CPU,
// device memory on a GPU); the pool does the accounting. Not thread-safe: one stage model, one
// thread of control.
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include "plait/core/dtype.h"
#include "plait/core/memory_tracker.h"
#include "plait/kernels/cpu_backend.h"

namespace plait::model {

class TensorPool;

// A block of `size()` elements of one type (fp32, or bf16 under mixed precision:
// spec/precision_policy.h) from a TensorPool; returned to it when destroyed or reset. Move-only.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(PooledBuffer&& other) noexcept { swap(other); }
  PooledBuffer& operator=(PooledBuffer&& other) noexcept {
    PooledBuffer(std::move(other)).swap(*this);
    return *this;
  }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer() { reset(); }

  // The elements as fp32 (the buffer must hold fp32: checked in debug builds).
  float* data() const {
    assert(dtype_ == DType::f32);
    return as<float>();
  }
  // The elements as T, which must be the buffer's type (or the bytes as 32-bit integers: the
  // token ids, held in an fp32-sized buffer).
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  MemoryCategory category() const { return category_; }
  // The same bytes as 32-bit integers (token ids).
  std::int32_t* ints() const { return static_cast<std::int32_t*>(data_); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }
  void reset();

  void swap(PooledBuffer& other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(category_, other.category_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    std::swap(dtype_, other.dtype_);
  }

 private:
  friend class TensorPool;
  TensorPool* pool_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kActivations;
  void* data_ = nullptr;
  std::size_t count_ = 0;
  DType dtype_ = DType::f32;
};

class TensorPool {
 public:
  explicit TensorPool(MemoryTracker& tracker, kernels::Backend& backend = kernels::cpu_backend())
      : tracker_(tracker), backend_(backend) {}
  TensorPool(const TensorPool&) = delete;
  TensorPool& operator=(const TensorPool&) = delete;
  ~TensorPool();  // every PooledBuffer must be gone by now

  // `count` elements of `dtype` charged to `category` (count * dtype_size bytes); contents
  // undefined. Throws OutOfMemoryError (from the tracker) before allocating anything if the
  // capacity would be exceeded.
  PooledBuffer acquire(MemoryCategory category, std::size_t count, DType dtype = DType::f32);
  PooledBuffer acquire_zeroed(MemoryCategory category, std::size_t count,
                              DType dtype = DType::f32);
  template <typename T>
  PooledBuffer acquire_as(MemoryCategory category, std::size_t count) {
    return acquire(category, count, dtype_of<T>());
  }

  MemoryTracker& tracker() const { return tracker_; }
  kernels::Backend& backend() const { return backend_; }
  std::size_t cached_bytes() const { return cached_bytes_; }
  // Blocks obtained from the system so far (cache misses); flat in a steady training loop.
  std::size_t system_allocations() const { return system_allocations_; }
  // Returns every cached block to the system.
  void release_cache();

 private:
  friend class PooledBuffer;
  void give_back(PooledBuffer& buffer);

  MemoryTracker& tracker_;
  kernels::Backend& backend_;
  std::multimap<std::size_t, void*> free_;  // rounded byte size -> block
  std::size_t cached_bytes_ = 0;
  std::size_t in_use_bytes_ = 0;
  std::size_t peak_in_use_bytes_ = 0;
  std::size_t system_allocations_ = 0;
};

}  // namespace plait::model
