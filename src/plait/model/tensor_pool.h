#pragma once
// Working memory for activations, K/V caches and gradients of units in flight. Each block is
// charged to a MemoryTracker category while it is handed out (so accounting, peaks and the
// capacity error see exactly what the model holds); freed blocks are cached by size and handed
// out again, so a training step does not fault fresh pages in and the kernel does not have to
// zero them each step (the same idea as PyTorch's caching allocator). The blocks are the
// backend's memory (kernels/backend.h: host memory with transparent huge pages on the CPU,
// device memory on a GPU); the pool does the accounting. Not thread-safe: one stage model, one
// thread of control.
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include "plait/core/memory_tracker.h"
#include "plait/kernels/cpu_backend.h"

namespace plait::model {

class TensorPool;

// A block of floats from a TensorPool; returned to it when destroyed or reset. Move-only.
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

  float* data() const { return data_; }
  // The same bytes as 32-bit integers (token ids).
  std::int32_t* ints() const { return reinterpret_cast<std::int32_t*>(data_); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(float); }
  bool empty() const { return data_ == nullptr; }
  void reset();

  void swap(PooledBuffer& other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(category_, other.category_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }

 private:
  friend class TensorPool;
  TensorPool* pool_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kActivations;
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

class TensorPool {
 public:
  explicit TensorPool(MemoryTracker& tracker, kernels::Backend& backend = kernels::cpu_backend())
      : tracker_(tracker), backend_(backend) {}
  TensorPool(const TensorPool&) = delete;
  TensorPool& operator=(const TensorPool&) = delete;
  ~TensorPool();  // every PooledBuffer must be gone by now

  // `count` floats charged to `category`; contents undefined. Throws OutOfMemoryError (from the
  // tracker) before allocating anything if the capacity would be exceeded.
  PooledBuffer acquire(MemoryCategory category, std::size_t count);
  PooledBuffer acquire_zeroed(MemoryCategory category, std::size_t count);

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
