#include "plait/schedule/action.h"

#include <charconv>

namespace plait::schedule {

std::string_view kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::F: return "F";
    case ActionKind::B: return "B";
    case ActionKind::W: return "W";
    case ActionKind::BW: return "BW";
  }
  return "?";
}

void append_action(std::string& out, const Action& action, bool with_chunk) {
  out += kind_name(action.kind);
  char buf[16];
  auto put = [&](std::int32_t value) {
    auto res = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, res.ptr);
  };
  put(action.microbatch);
  out += '.';
  put(action.segment);
  if (with_chunk) {
    out += 'c';
    put(action.chunk);
  }
}

std::string to_string(const Action& action, bool with_chunk) {
  std::string out;
  append_action(out, action, with_chunk);
  return out;
}

namespace {

// Reads a non-negative decimal integer at token[pos...]; false if there is none or it overflows.
bool read_index(std::string_view token, std::size_t& pos, std::int32_t& value) {
  const char* first = token.data() + pos;
  const char* last = token.data() + token.size();
  if (first == last || *first < '0' || *first > '9') return false;
  auto res = std::from_chars(first, last, value);
  if (res.ec != std::errc()) return false;
  pos = static_cast<std::size_t>(res.ptr - token.data());
  return true;
}

}  // namespace

bool parse_action(std::string_view token, Action& action, std::string& error,
                  std::size_t& error_offset) {
  std::size_t pos = 0;
  if (token.starts_with("BW")) {
    action.kind = ActionKind::BW;
    pos = 2;
  } else if (!token.empty() && (token[0] == 'F' || token[0] == 'B' || token[0] == 'W')) {
    action.kind = token[0] == 'F' ? ActionKind::F : token[0] == 'B' ? ActionKind::B : ActionKind::W;
    pos = 1;
  } else {
    error = "expected an action kind F, B, W or BW";
    error_offset = 0;
    return false;
  }
  if (!read_index(token, pos, action.microbatch)) {
    error = "expected a micro-batch number after the kind";
    error_offset = pos;
    return false;
  }
  if (pos >= token.size() || token[pos] != '.') {
    error = "expected '.' and a segment number after the micro-batch";
    error_offset = pos;
    return false;
  }
  ++pos;
  if (!read_index(token, pos, action.segment)) {
    error = "expected a segment number after '.'";
    error_offset = pos;
    return false;
  }
  action.chunk = 0;
  if (pos < token.size() && token[pos] == 'c') {
    ++pos;
    const std::size_t start = pos;
    if (!read_index(token, pos, action.chunk)) {
      error = "expected a chunk number after 'c'";
      error_offset = pos;
      return false;
    }
    // A rank's chunks become that many virtual stages per rank in the inferred layout; a stray
    // "c310000000" would otherwise allocate ranks x 310M stage slots (found by fuzz_schedule_text).
    if (action.chunk >= kMaxChunks) {
      error = "expected a chunk number in [0, " + std::to_string(kMaxChunks - 1) + "]";
      error_offset = start;
      return false;
    }
  }
  if (pos != token.size()) {
    error = "unexpected characters after the action";
    error_offset = pos;
    return false;
  }
  return true;
}

}  // namespace plait::schedule
