#pragma once
// The categories plait accounts memory in; the simulator's memory model uses the same ones,
// so predicted and measured peaks can be laid side by side.
#include <array>
#include <cstddef>
#include <string_view>

namespace plait {

enum class MemoryCategory : int {
  kParameters = 0,
  kGradients,
  kOptimizerState,
  kActivations,
  kKVCache,
  kCommBuffers,
};
inline constexpr std::size_t kMemoryCategoryCount = 6;

inline constexpr std::array<std::string_view, kMemoryCategoryCount> kMemoryCategoryNames = {
    "parameters", "gradients", "optimizer_state", "activations", "kv_cache", "comm_buffers"};

constexpr std::string_view name_of(MemoryCategory c) {
  return kMemoryCategoryNames[static_cast<std::size_t>(c)];
}

// Where memory lives: the device's own memory (an accelerator's, or a CPU rank's emulated
// device) or the host tier beside it, which holds offloaded optimizer state and ZeRO-3's parked
// parameter shards and is reached through a CopyEngine (copy_engine.h). Each tier has its own
// MemoryTracker, capacity and categories.
enum class MemoryTier : int { kDevice = 0, kHost };

constexpr std::string_view name_of(MemoryTier tier) { return tier == MemoryTier::kDevice ? "device" : "host"; }

}  // namespace plait
