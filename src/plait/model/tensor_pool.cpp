#include "plait/model/tensor_pool.h"

#include <algorithm>

namespace plait::model {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Blocks are cached by their size rounded up to a page (4 KiB), or to a huge page from 2 MiB.
std::size_t rounded_bytes(std::size_t bytes) {
  const std::size_t unit = bytes >= kHugePage ? kHugePage : 4096;
  return (bytes + unit - 1) / unit * unit;
}

}  // namespace

void PooledBuffer::reset() {
  if (pool_ != nullptr && data_ != nullptr) pool_->give_back(*this);
  pool_ = nullptr;
  data_ = nullptr;
  count_ = 0;
}

TensorPool::~TensorPool() { release_cache(); }

PooledBuffer TensorPool::acquire(MemoryCategory category, std::size_t count, DType dtype) {
  PooledBuffer buffer;
  if (count == 0) return buffer;
  const std::size_t bytes = count * dtype_size(dtype);
  tracker_.allocate(category, bytes);
  const std::size_t size = rounded_bytes(bytes);
  void* block = nullptr;
  if (auto it = free_.find(size); it != free_.end()) {
    block = it->second;
    free_.erase(it);
    cached_bytes_ -= size;
  } else {
    // A repeated sequence of acquires (a training step) hits the cache from its second run on if
    // every block the first run made is kept: it holds each size's largest concurrent use, which
    // can exceed the peak in use (sizes peak at different times) but not by much. Only when
    // holding twice the peak would the cache be dead weight: then it goes back to the system.
    const std::size_t peak = std::max(peak_in_use_bytes_, in_use_bytes_ + size);
    if (cached_bytes_ + in_use_bytes_ + size > 2 * peak) release_cache();
    try {
      block = backend_.allocate(size);
      ++system_allocations_;
    } catch (...) {
      tracker_.release(category, bytes);
      throw;
    }
  }
  in_use_bytes_ += size;
  peak_in_use_bytes_ = std::max(peak_in_use_bytes_, in_use_bytes_);
  buffer.pool_ = this;
  buffer.category_ = category;
  buffer.data_ = block;
  buffer.count_ = count;
  buffer.dtype_ = dtype;
  return buffer;
}

PooledBuffer TensorPool::acquire_zeroed(MemoryCategory category, std::size_t count,
                                        DType dtype) {
  PooledBuffer buffer = acquire(category, count, dtype);
  if (!buffer.empty()) backend_.zero(buffer.data(), buffer.bytes());
  return buffer;
}

void TensorPool::give_back(PooledBuffer& buffer) {
  const std::size_t size = rounded_bytes(buffer.bytes());
  tracker_.release(buffer.category_, buffer.bytes());
  in_use_bytes_ -= size;
  free_.emplace(size, buffer.data_);
  cached_bytes_ += size;
}

void TensorPool::release_cache() {
  for (auto& [size, block] : free_) backend_.deallocate(block, size);
  free_.clear();
  cached_bytes_ = 0;
}

}  // namespace plait::model
