#include "plait/cli/byte_size.h"

#include "plait/core/error.h"

namespace plait::cli {

std::size_t parse_byte_size(const std::string& flag, const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    throw InputError(flag, text, "expected a size such as 512MiB or 2GiB");
  }
  const std::string unit = text.substr(pos);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024;
  if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (scale == 0 || value <= 0) throw InputError(flag, text, "expected a size such as 512MiB or 2GiB");
  return static_cast<std::size_t>(value * scale);
}

}  // namespace plait::cli
