#include "plait/runtime/lost_rank.h"

#include <csignal>
#include <string>

namespace plait::runtime {
namespace {

// Reads the decimal number at `text`'s start (at most 18 digits) and drops it; nullopt when
// there is none.
std::optional<std::int64_t> take_number(std::string_view& text) {
  std::size_t n = 0;
  std::int64_t value = 0;
  while (n < text.size() && n < 18 && text[n] >= '0' && text[n] <= '9') value = value * 10 + (text[n++] - '0');
  if (n == 0) return std::nullopt;
  text.remove_prefix(n);
  return value;
}

bool take(std::string_view& text, std::string_view word) {
  if (!text.starts_with(word)) return false;
  text.remove_prefix(word.size());
  return true;
}

// "... process rank R with PID P on node N exited on signal S ..."
std::optional<LostRankNotice> launcher_notice(std::string_view line) {
  const std::size_t at = line.find("process rank ");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + 13);
  const std::optional<std::int64_t> rank = take_number(rest);
  if (!rank || !take(rest, " with PID ") || !take_number(rest) || !take(rest, " on node ")) return std::nullopt;
  const std::size_t exited = rest.find(" exited on signal ");
  if (exited == std::string_view::npos || rest.substr(0, exited).find(' ') != std::string_view::npos) return std::nullopt;
  rest.remove_prefix(exited + 18);
  const std::optional<std::int64_t> signal = take_number(rest);
  if (!signal || *rank > (1 << 30)) return std::nullopt;
  return LostRankNotice{LostRankNotice::Source::kLauncher, static_cast<int>(*rank), static_cast<int>(*signal), -1};
}

// "plait: rank R: step S: killing itself with SIGKILL ..."
std::optional<LostRankNotice> announcement(std::string_view line) {
  std::string_view rest = line;
  if (!take(rest, "plait: rank ")) return std::nullopt;
  const std::optional<std::int64_t> rank = take_number(rest);
  if (!rank || !take(rest, ": step ")) return std::nullopt;
  const std::optional<std::int64_t> step = take_number(rest);
  if (!step || !take(rest, ": killing itself with SIGKILL") || *rank > (1 << 30)) return std::nullopt;
  return LostRankNotice{LostRankNotice::Source::kAnnouncement, static_cast<int>(*rank), SIGKILL, *step};
}

}  // namespace

std::optional<LostRankNotice> parse_lost_rank_notice(std::string_view line) {
  if (std::optional<LostRankNotice> n = announcement(line)) return n;
  return launcher_notice(line);
}

}  // namespace plait::runtime
