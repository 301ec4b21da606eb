#pragma once
// Memory accounting by category: current and peak bytes, and an optional capacity (a device's
// memory, or its host tier's) beyond which an allocation fails with OutOfMemoryError naming the
// category and sizes (and the tier, when it is the host's).
// Thread-safe: the runtime's communication thread allocates receive buffers concurrently.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "plait/core/error.h"
#include "plait/core/memory_category.h"

namespace plait {

class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(MemoryCategory category, std::size_t requested, std::size_t in_use,
                   std::size_t capacity, MemoryTier tier = MemoryTier::kDevice);
  MemoryCategory category() const { return category_; }

 private:
  MemoryCategory category_;
};

// The host refused an allocation (malloc returned null): e.g. a model whose parameters alone
// exceed the machine's memory. Names the category, the size asked and what is already held.
class HostOutOfMemoryError : public Error {
 public:
  HostOutOfMemoryError(MemoryCategory category, std::size_t requested, std::size_t held);
};

// A snapshot of the tracker, for reports.
struct MemoryReport {
  std::array<std::size_t, kMemoryCategoryCount> current{};
  std::array<std::size_t, kMemoryCategoryCount> peak{};
  std::size_t current_total = 0;
  std::size_t peak_total = 0;  // peak of the sum, not the sum of the peaks
};

class MemoryTracker {
 public:
  explicit MemoryTracker(std::optional<std::size_t> capacity_bytes = std::nullopt,
                         MemoryTier tier = MemoryTier::kDevice);
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Throws OutOfMemoryError (and records nothing) if the total would exceed the capacity.
  void allocate(MemoryCategory category, std::size_t bytes);
  void release(MemoryCategory category, std::size_t bytes);

  std::size_t current(MemoryCategory category) const;
  std::size_t peak(MemoryCategory category) const;
  std::size_t current_total() const { return total_.load(); }
  std::size_t peak_total() const { return peak_total_.load(); }
  std::optional<std::size_t> capacity() const { return capacity_; }
  MemoryTier tier() const { return tier_; }
  void set_capacity(std::optional<std::size_t> capacity_bytes) { capacity_ = capacity_bytes; }

  // Peaks restart from the current values (e.g. to measure one training step).
  void reset_peaks();
  MemoryReport report() const;

 private:
  std::optional<std::size_t> capacity_;
  MemoryTier tier_;
  std::array<std::atomic<std::size_t>, kMemoryCategoryCount> current_{};
  std::array<std::atomic<std::size_t>, kMemoryCategoryCount> peak_{};
  std::atomic<std::size_t> total_{0};
  std::atomic<std::size_t> peak_total_{0};
};

// Human-readable byte count ("1.50 GiB").
std::string format_bytes(std::size_t bytes);

}  // namespace plait
