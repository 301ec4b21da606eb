#include "plait/cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "plait/core/monotonic_clock.h"

namespace plait::cli {
namespace {

std::string clock_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%ld:%02ld", s / 60, s % 60);
  }
  return text;
}

}  // namespace

ProgressBar::ProgressBar(int total_steps, std::int64_t tokens_per_step, std::FILE* out)
    : total_(total_steps),
      tokens_per_step_(tokens_per_step),
      out_(out),
      tty_(isatty(fileno(out)) != 0),
      every_(std::max(1, total_steps / 20)),
      last_time_(monotonic_seconds()),
      last_draw_(last_time_ - 1.0) {}

double ProgressBar::tokens_per_second() const {
  if (step_seconds_.empty()) return 0.0;
  const double secs = std::accumulate(step_seconds_.begin(), step_seconds_.end(), 0.0);
  return secs > 0 ? static_cast<double>(tokens_per_step_) * step_seconds_.size() / secs : 0.0;
}

void ProgressBar::update(int step, double loss, double lr) {
  const double now = monotonic_seconds();
  step_seconds_.push_back(now - last_time_);
  if (step_seconds_.size() > 10) step_seconds_.pop_front();
  last_time_ = now;
  const int done = step + 1;
  const bool last = done >= total_;
  const double tps = tokens_per_second();
  const double eta = tps > 0 ? (total_ - done) * static_cast<double>(tokens_per_step_) / tps : 0;
  if (tty_) {
    if (!last && now - last_draw_ < 0.1) return;
    last_draw_ = now;
    constexpr int kWidth = 24;
    const int filled = kWidth * done / std::max(1, total_);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    const int width = static_cast<int>(std::to_string(total_).size());
    std::fprintf(out_, "\r  step %*d (%*d/%d done) [%s] loss %.4f  lr %.2e  %.0f tok/s  ETA %s \x1b[K",
                 width, step, width, done, total_, bar.c_str(), loss, lr, tps, clock_text(eta).c_str());
    drawn_ = true;
  } else if (done % every_ == 0 || last || !printed_) {
    // The run's first step too (step 0, or the first of a resumed run): a supervisor reading the
    // output (plait launch) times a restart to it.
    printed_ = true;
    std::fprintf(out_, "  step %d (%d/%d done)  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\n", step, done,
                 total_, loss, lr, tps, clock_text(eta).c_str());
  }
  std::fflush(out_);
}

void ProgressBar::note(const std::string& line) {
  if (tty_ && drawn_) std::fprintf(out_, "\r\x1b[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (tty_ && drawn_) std::fprintf(out_, "\n");
  drawn_ = false;
}

}  // namespace plait::cli
