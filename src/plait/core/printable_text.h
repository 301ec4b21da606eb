#pragma once
// Text from an input file, made safe to echo in an error message: a message is one line of
// valid UTF-8 on a terminal, whatever bytes the file held.
#include <cstddef>
#include <string>
#include <string_view>

namespace plait {

// `text` with every byte that is not part of a valid, printable UTF-8 character (control
// characters, a stray continuation byte, an overlong or truncated sequence, a surrogate)
// written as \xNN, and a backslash as \\; at most `max_chars` characters of it, then "...".
std::string printable_text(std::string_view text, std::size_t max_chars = 80);

}  // namespace plait
