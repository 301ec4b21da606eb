#pragma once
// Sizes on the command line: "512MiB", "2GiB", "1000000" (bytes).
#include <cstddef>
#include <string>

namespace plait::cli {

// Bytes; an InputError naming `flag` for anything else.
std::size_t parse_byte_size(const std::string& flag, const std::string& text);

}  // namespace plait::cli
