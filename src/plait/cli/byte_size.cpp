#include "plait/cli/byte_size.h"

#include <cmath>

#include "plait/core/error.h"
#include "plait/core/printable_text.h"

namespace plait::cli {

std::size_t parse_byte_size(const std::string& flag, const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InputError(flag, "'" + printable_text(text, 40) + "'", why);
  };
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    throw bad("expected a size such as 512MiB or 2GiB");
  }
  const std::string unit = text.substr(pos);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024;
  if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (scale == 0 || !(value > 0) || !std::isfinite(value)) throw bad("expected a size such as 512MiB or 2GiB");
  // A double converts to size_t only below 2^64; beyond that the cast is undefined (it gave a
  // 0-byte capacity). No machine has 2^63 bytes anyway.
  const double bytes = value * scale;
  constexpr double kLimit = 9223372036854775808.0;  // 2^63 = 8 EiB
  if (bytes >= kLimit) throw bad("more than 8 EiB (2^63 bytes); expected a size such as 512MiB or 2GiB");
  if (bytes < 1) throw bad("less than one byte");
  return static_cast<std::size_t>(bytes);
}

}  // namespace plait::cli
