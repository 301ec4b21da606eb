#pragma once
// A JSON string literal (quoted, escaped) for the trace writers, which emit JSON by hand so that
// a million events stay fast.
#include <string>
#include <string_view>

namespace plait::trace {

std::string json_string(std::string_view text);

}  // namespace plait::trace
