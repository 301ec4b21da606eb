#include "plait/cli/flag_values.h"

#include <charconv>
#include <sstream>

#include "plait/core/error.h"
#include "plait/core/printable_text.h"

namespace plait::cli {

std::int64_t integer_flag(const std::string& flag, const std::string& text, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || res.ec != std::errc() || res.ptr != text.data() + text.size() || value < min || value > max) {
    throw Error(flag + ": expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                "], found '" + printable_text(text, 40) + "'");
  }
  return value;
}

double number_flag(const std::string& flag, const std::string& text, double min, double max) {
  double value = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || res.ec != std::errc() || res.ptr != text.data() + text.size() || !(value >= min && value <= max)) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    throw Error(flag + ": expected a number in " + range.str() + ", found '" + printable_text(text, 40) + "'");
  }
  return value;
}

std::int64_t positive_flag(const std::string& flag, const std::string& text, std::int64_t max) {
  return integer_flag(flag, text, 1, max);
}

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace plait::cli
