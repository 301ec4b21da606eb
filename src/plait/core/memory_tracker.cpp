#include "plait/core/memory_tracker.h"

#include <cstdint>
#include <cstdio>

namespace plait {
namespace {

void raise_to(std::atomic<std::size_t>& peak, std::size_t value) {
  std::size_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

std::string oom_message(MemoryCategory category, std::size_t requested, std::size_t in_use,
                        std::size_t capacity, MemoryTier tier) {
  return "out of memory: allocating " + format_bytes(requested) + " of " +
         std::string(name_of(category)) + " with " + format_bytes(in_use) + " in use exceeds the " +
         format_bytes(capacity) + (tier == MemoryTier::kHost ? " host" : "") + " capacity";
}

}  // namespace

OutOfMemoryError::OutOfMemoryError(MemoryCategory category, std::size_t requested,
                                   std::size_t in_use, std::size_t capacity, MemoryTier tier)
    : Error(oom_message(category, requested, in_use, capacity, tier)), category_(category) {}

HostOutOfMemoryError::HostOutOfMemoryError(MemoryCategory category, std::size_t requested,
                                           std::size_t held)
    : Error("out of memory: this machine cannot allocate " +
            (requested == SIZE_MAX ? std::string("more than 16 EiB") : format_bytes(requested)) + " of " +
            std::string(name_of(category)) + " (" + format_bytes(held) +
            " already held); the model or batch needs more memory than the machine has") {}

MemoryTracker::MemoryTracker(std::optional<std::size_t> capacity_bytes, MemoryTier tier)
    : capacity_(capacity_bytes), tier_(tier) {}

void MemoryTracker::allocate(MemoryCategory category, std::size_t bytes) {
  const auto i = static_cast<std::size_t>(category);
  std::size_t total = total_.load();
  do {
    if (capacity_ && total + bytes > *capacity_) {
      throw OutOfMemoryError(category, bytes, total, *capacity_, tier_);
    }
  } while (!total_.compare_exchange_weak(total, total + bytes));
  raise_to(peak_total_, total + bytes);
  raise_to(peak_[i], current_[i].fetch_add(bytes) + bytes);
}

void MemoryTracker::release(MemoryCategory category, std::size_t bytes) {
  const auto i = static_cast<std::size_t>(category);
  if (current_[i].load() < bytes) {
    throw Error("memory accounting: releasing " + std::to_string(bytes) + " bytes of " +
                std::string(name_of(category)) + " but only " + std::to_string(current_[i].load()) +
                " are allocated");
  }
  current_[i].fetch_sub(bytes);
  total_.fetch_sub(bytes);
}

std::size_t MemoryTracker::current(MemoryCategory category) const {
  return current_[static_cast<std::size_t>(category)].load();
}

std::size_t MemoryTracker::peak(MemoryCategory category) const {
  return peak_[static_cast<std::size_t>(category)].load();
}

void MemoryTracker::reset_peaks() {
  for (std::size_t i = 0; i < kMemoryCategoryCount; ++i) peak_[i].store(current_[i].load());
  peak_total_.store(total_.load());
}

MemoryReport MemoryTracker::report() const {
  MemoryReport r;
  for (std::size_t i = 0; i < kMemoryCategoryCount; ++i) {
    r.current[i] = current_[i].load();
    r.peak[i] = peak_[i].load();
  }
  r.current_total = total_.load();
  r.peak_total = peak_total_.load();
  return r;
}

std::string format_bytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, kUnits[unit]);
  return text;
}

}  // namespace plait
