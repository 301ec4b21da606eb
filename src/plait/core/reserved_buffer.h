#pragma once
// An owned array of T whose ADDRESS is reserved for its whole life while its MEMORY is committed
// and decommitted on demand: commit() charges the bytes to one category of a MemoryTracker (an
// emulated device's capacity applies) and makes them readable and writable, zero-filled;
// decommit() returns the pages to the system, releases them from the tracker and makes the
// range inaccessible, so a stray access faults instead of silently reading zeros. Pointers into
// it stay valid across a decommit/commit cycle, which is what lets a model's layers keep raw
// pointers to parameters that ZeRO-3 releases after their last use and gathers again (and
// gradients that ZeRO-2 frees once reduce-scattered). This is the CPU form of CUDA's virtual
// memory management: cuMemAddressReserve once, cuMemCreate + cuMemMap on commit, cuMemUnmap +
// cuMemRelease on decommit. A committed buffer may also keep only a range resident (retain): the
// rest goes back, the range keeps its contents and address, and commit() brings the rest back
// zero-filled — a ZeRO-3 stage keeps its own shard of the weights in place between uses.
// Move-only; an empty ReservedBuffer owns nothing.
#include <cstddef>
#include <span>
#include <utility>

#include "plait/core/memory_tracker.h"

namespace plait {

// The untyped mapping: page-granular reservation, commit and decommit (reserved_buffer.cpp).
class ReservedBytes {
 public:
  ReservedBytes() = default;
  ReservedBytes(MemoryTracker& tracker, MemoryCategory category, std::size_t bytes, bool committed);
  ReservedBytes(ReservedBytes&& other) noexcept { swap(other); }
  ReservedBytes& operator=(ReservedBytes&& other) noexcept {
    ReservedBytes(std::move(other)).swap(*this);
    return *this;
  }
  ReservedBytes(const ReservedBytes&) = delete;
  ReservedBytes& operator=(const ReservedBytes&) = delete;
  ~ReservedBytes();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // All of it resident (after commit(), before any retain or decommit).
  bool committed() const { return resident_ == bytes_; }
  // Bytes charged to the tracker: all, the retained range, or none.
  std::size_t resident_bytes() const { return resident_; }
  MemoryCategory category() const { return category_; }
  // No-ops when already in that state. commit() throws OutOfMemoryError (and stays as it was)
  // when the tracker's capacity would be exceeded; from a retained range it keeps the range's
  // contents and zero-fills the rest.
  void commit();
  void decommit();
  // Keeps bytes [offset, offset + length) resident and charged (the whole pages around them stay
  // mapped, the rest is returned and made inaccessible). Requires a committed buffer.
  void retain(std::size_t offset, std::size_t length);

  void swap(ReservedBytes& other) noexcept {
    std::swap(tracker_, other.tracker_);
    std::swap(category_, other.category_);
    std::swap(bytes_, other.bytes_);
    std::swap(mapped_, other.mapped_);
    std::swap(data_, other.data_);
    std::swap(resident_, other.resident_);
  }

 private:
  void unmap_pages(std::size_t begin, std::size_t end);

  MemoryTracker* tracker_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kParameters;
  std::size_t bytes_ = 0;
  std::size_t mapped_ = 0;  // bytes rounded up to whole pages
  void* data_ = nullptr;
  std::size_t resident_ = 0;  // bytes charged to the tracker
};

template <typename T>
class ReservedBuffer {
 public:
  ReservedBuffer() = default;
  // Reserves `count` elements; commits them (zero-filled) when `committed`.
  ReservedBuffer(MemoryTracker& tracker, MemoryCategory category, std::size_t count, bool committed = true)
      : bytes_(tracker, category, count * sizeof(T), committed), count_(count) {}

  T* data() { return static_cast<T*>(bytes_.data()); }
  const T* data() const { return static_cast<const T*>(bytes_.data()); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return bytes_.bytes(); }
  bool empty() const { return count_ == 0; }
  bool committed() const { return bytes_.committed(); }
  MemoryCategory category() const { return bytes_.category(); }
  std::span<T> span() { return {data(), count_}; }
  std::span<const T> span() const { return {data(), count_}; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  std::size_t resident_bytes() const { return bytes_.resident_bytes(); }
  void commit() { bytes_.commit(); }
  void decommit() { bytes_.decommit(); }
  // Keeps elements [first, first + count) resident (ReservedBytes::retain).
  void retain(std::size_t first, std::size_t count) { bytes_.retain(first * sizeof(T), count * sizeof(T)); }

 private:
  ReservedBytes bytes_;
  std::size_t count_ = 0;
};

}  // namespace plait
