#pragma once
// An owned, 64-byte aligned array of T whose bytes are charged to one memory category of a
// MemoryTracker for as long as it lives. Move-only; an empty Buffer owns nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "plait/core/memory_tracker.h"

namespace plait {

template <typename T>
class Buffer {
 public:
  Buffer() = default;
  // Zero-filled; throws OutOfMemoryError if the tracker's capacity would be exceeded, or if the
  // system cannot give the memory (then naming the size and what is already held, since a
  // model too large for the machine shows here first).
  Buffer(MemoryTracker& tracker, MemoryCategory category, std::size_t count)
      : tracker_(&tracker), category_(category), count_(count) {
    if (count_ > (SIZE_MAX - 64) / sizeof(T)) {
      tracker_ = nullptr;
      throw HostOutOfMemoryError(category, SIZE_MAX, tracker.current_total());
    }
    tracker_->allocate(category_, bytes());
    if (count_ > 0) {
      const std::size_t size = (bytes() + 63) / 64 * 64;
      data_ = static_cast<T*>(std::aligned_alloc(64, size));
      if (data_ == nullptr) {
        tracker_->release(category_, bytes());
        const std::size_t held = tracker_->current_total();
        tracker_ = nullptr;
        throw HostOutOfMemoryError(category, bytes(), held);
      }
      std::memset(static_cast<void*>(data_), 0, size);
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
    std::free(data_);
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
    if (count_ > 0) std::memset(static_cast<void*>(data_), 0, bytes());
  }

  void swap(Buffer& other) noexcept {
    std::swap(tracker_, other.tracker_);
    std::swap(category_, other.category_);
    std::swap(count_, other.count_);
    std::swap(data_, other.data_);
  }

 private:
  MemoryTracker* tracker_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kActivations;
  std::size_t count_ = 0;
  T* data_ = nullptr;
};

using FloatBuffer = Buffer<float>;

}  // namespace plait
