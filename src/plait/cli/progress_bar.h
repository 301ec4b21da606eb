#pragma once
// Training progress on stderr: the step (counted from 0, as --metrics, --trace-step and the
// validation lines count it) and the steps done of train.steps, loss, learning rate, tokens/s
// and ETA. On a terminal one line is redrawn in place (at most 10 times a second); otherwise (a
// log file, CI) a plain line is printed every `every` steps and for the last step, so logs stay
// readable.
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>

namespace plait::cli {

class ProgressBar {
 public:
  ProgressBar(int total_steps, std::int64_t tokens_per_step, std::FILE* out = stderr);

  // Called after step `step` (counting from 0) finished.
  void update(int step, double loss, double lr);
  // Ends the redrawn line (no-op when not on a terminal).
  void finish();
  // Prints a line of its own (a validation loss, a skipped step) without breaking the redrawn
  // progress line, which the next update draws again.
  void note(const std::string& line);

  // Tokens per second over the recent steps (a sliding window of 10).
  double tokens_per_second() const;

 private:
  int total_;
  std::int64_t tokens_per_step_;
  std::FILE* out_;
  bool tty_;
  int every_;
  double last_time_;  // monotonic_seconds()
  double last_draw_;
  std::deque<double> step_seconds_;
  bool drawn_ = false;
  bool printed_ = false;  // a line was printed (not on a terminal): a run's first step always is
};

}  // namespace plait::cli
