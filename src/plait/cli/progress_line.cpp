#include "plait/cli/progress_line.h"

#include <unistd.h>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"

namespace plait::cli {

ProgressLine::ProgressLine(When when, std::FILE* out)
    : when_(when), out_(out), tty_(isatty(fileno(out)) != 0), start_(monotonic_seconds()) {}

void ProgressLine::update(const std::string& what, std::int64_t done, std::int64_t total) {
  if (when_ == When::kNever) return;
  const double now = monotonic_seconds();
  if (when_ == When::kAuto && now - start_ < kQuietSeconds) return;
  const bool new_pass = what != last_what_;
  if (now - last_draw_ < (tty_ ? 0.1 : kLogSeconds) && !(new_pass && !tty_)) return;
  last_draw_ = now;
  last_what_ = what;
  const std::string line = "plait: " + what + " [" + std::to_string(done) + "/" + std::to_string(total) + "] after " +
                           std::to_string(static_cast<long>(now - start_)) + " s";
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

SearchProgress ProgressLine::callback() {
  return [this](const std::string& what, std::int64_t done, std::int64_t total) { update(what, done, total); };
}

ProgressLine::When parse_progress_flag(const std::string& text) {
  if (text == "auto") return ProgressLine::When::kAuto;
  if (text == "always") return ProgressLine::When::kAlways;
  if (text == "never") return ProgressLine::When::kNever;
  throw Error("--progress: expected auto, always or never, found '" + text + "'");
}

}  // namespace plait::cli
