#pragma once
// The memory this process may still take before the machine (or its container) runs out, for
// commands that refuse work whose memory estimate exceeds it (plait sim, plait plan).
#include <cstdint>
#include <optional>
#include <string>

namespace plait {

struct AvailableMemory {
  std::uint64_t bytes = 0;
  std::string source;  // "MemAvailable in /proc/meminfo", "the cgroup's memory.max"
};

// The smaller of the kernel's MemAvailable (/proc/meminfo: free memory plus what the page cache
// and reclaimable caches would give back) and the room left under this process's cgroup limit
// (v2 memory.max - memory.current, or v1 memory.limit_in_bytes - memory.usage_in_bytes).
// nullopt where neither can be read (not Linux).
std::optional<AvailableMemory> available_memory();

}  // namespace plait
