// Fuzzes the parser of a lock file's holder line (core/directory_lock.h): whatever a lock file
// holds (it is read from a directory others may write), the parser returns a host of the allowed
// characters and a pid in range, or nothing; what it accepts is exactly the line
// lock_holder_text writes back.
#include <cstdint>
#include <string_view>

#include "plait/core/directory_lock.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto holder = plait::parse_lock_holder(text);
  if (!holder) return 0;
  if (holder->pid < 1 || holder->pid > 2147483647 || holder->host.empty() || holder->host.size() > 255) {
    __builtin_trap();
  }
  for (const char c : holder->host) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) __builtin_trap();
  }
  if (plait::lock_holder_text(*holder) != text) __builtin_trap();
  return 0;
}
