#pragma once
// Values of command-line flags that CLI11's own checks do not cover, shared by the subcommands
// (plait sim, plait plan, plait train, plait bench runtime): errors name the flag and what was found.
#include <cstdint>
#include <string>
#include <vector>

namespace plait::cli {

// An integer in [min, max] written as `text`, or plait::Error
// "<flag>: expected an integer in [<min>, <max>], found '<text>'" (also for text that is not a
// number or does not fit 64 bits).
std::int64_t integer_flag(const std::string& flag, const std::string& text, std::int64_t min, std::int64_t max);
// A finite number in [min, max] written as `text`, or plait::Error
// "<flag>: expected a number in [<min>, <max>], found '<text>'".
double number_flag(const std::string& flag, const std::string& text, double min, double max);
// integer_flag(flag, text, 1, max).
std::int64_t positive_flag(const std::string& flag, const std::string& text, std::int64_t max);

// The non-empty items of a comma-separated list ("a,,b" -> {"a", "b"}; "" -> {}).
std::vector<std::string> comma_list(const std::string& text);

}  // namespace plait::cli
