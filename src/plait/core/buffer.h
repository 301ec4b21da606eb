#pragma once
// An owned, 64-byte aligned array of T in a MemorySpace (the host's by default, a backend's
// device memory otherwise: memory_space.h) whose bytes are charged to one memory category of a
// MemoryTracker for as long as it lives. Move-only; an empty Buffer owns nothing. The element
// accessors and span() are for host memory; on a device they are pointers to pass to kernels.
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <utility>

#include "plait/core/memory_space.h"
#include "plait/core/memory_tracker.h"

namespace plait {

template <typename T>
class Buffer {
 public:
  Buffer() = default;
  // Zero-filled; throws OutOfMemoryError if the tracker's capacity would be exceeded, or if the
  // system cannot give the memory (then naming the size and what is already held, since a
  // model too large for the machine shows here first).
  Buffer(MemoryTracker& tracker, MemoryCategory category, std::size_t count,
         MemorySpace& memory = host_memory())
      : tracker_(&tracker), memory_(&memory), category_(category), count_(count) {
    if (count_ > (SIZE_MAX - 64) / sizeof(T)) {
      tracker_ = nullptr;
      throw HostOutOfMemoryError(category, SIZE_MAX, tracker.current_total());
    }
    tracker_->allocate(category_, bytes());
    if (count_ > 0) {
      try {
        data_ = static_cast<T*>(memory_->allocate(allocated_bytes()));
      } catch (const std::bad_alloc&) {
        tracker_->release(category_, bytes());
        const std::size_t held = tracker_->current_total();
        tracker_ = nullptr;
        throw HostOutOfMemoryError(category, bytes(), held);
      }
      memory_->zero(data_, allocated_bytes());
    }
  }
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (tracker_ != nullptr) tracker_->release(category_, bytes());
    if (data_ != nullptr) memory_->deallocate(data_, allocated_bytes());
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }
  MemoryCategory category() const { return category_; }
  std::span<T> span() { return {data_, count_}; }
  std::span<const T> span() const { return {data_, count_}; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  void zero() {
    if (count_ > 0) memory_->zero(data_, bytes());
  }

  void swap(Buffer& other) noexcept {
    std::swap(tracker_, other.tracker_);
    std::swap(memory_, other.memory_);
    std::swap(category_, other.category_);
    std::swap(count_, other.count_);
    std::swap(data_, other.data_);
  }

 private:
  // Whole 64-byte lines, so vector loops may run to the end of the last one.
  std::size_t allocated_bytes() const { return (bytes() + 63) / 64 * 64; }

  MemoryTracker* tracker_ = nullptr;
  MemorySpace* memory_ = &host_memory();
  MemoryCategory category_ = MemoryCategory::kActivations;
  std::size_t count_ = 0;
  T* data_ = nullptr;
};

using FloatBuffer = Buffer<float>;

}  // namespace plait
