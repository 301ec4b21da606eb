#include "plait/core/available_memory.h"

#include <fstream>
#include <sstream>

namespace plait {
namespace {

// The first number in `path` ("max" or an unreadable file: nullopt).
std::optional<std::uint64_t> number_in(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

// The room under this process's cgroup limit, at the cgroup root's mount (a container's own
// cgroup is mounted there).
std::optional<std::uint64_t> cgroup_room() {
  for (const auto& [limit, usage] : {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                                     std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                               "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const std::optional<std::uint64_t> l = number_in(limit), u = number_in(usage);
    if (l && u) return *l > *u ? *l - *u : 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<AvailableMemory> available_memory() {
  std::optional<AvailableMemory> best;
  if (const auto m = mem_available()) best = AvailableMemory{*m, "MemAvailable in /proc/meminfo"};
  if (const auto c = cgroup_room(); c && (!best || *c < best->bytes)) {
    best = AvailableMemory{*c, "the room under this process's cgroup memory limit"};
  }
  return best;
}

}  // namespace plait
