#pragma once
// The progress of a long search on stderr (plait sim, plait plan; core/search_progress.h): what
// the search is doing and how far it has got, "plait: comparing schedules, zb-v: timing [6/8]
// after 12 s". Nothing is shown while the search is short (kQuietSeconds); after that, on a
// terminal one line is redrawn in place (at most 10 times a second), elsewhere (a log, CI) a
// line is printed when the pass changes and otherwise at most every kLogSeconds.
#include <cstdint>
#include <cstdio>
#include <string>

#include "plait/core/search_progress.h"

namespace plait::cli {

class ProgressLine {
 public:
  enum class When { kAuto, kAlways, kNever };  // --progress auto | always | never
  static constexpr double kQuietSeconds = 2.0;
  static constexpr double kLogSeconds = 5.0;

  explicit ProgressLine(When when, std::FILE* out = stderr);
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void update(const std::string& what, std::int64_t done, std::int64_t total);
  // Ends a redrawn line, so that what follows starts on a line of its own.
  void finish();
  // A SearchProgress that updates this line (which must outlive it).
  SearchProgress callback();

 private:
  When when_;
  std::FILE* out_;
  bool tty_;
  double start_, last_draw_ = -1e9;
  std::string last_what_;
  bool drawn_ = false;  // a redrawn line is open
};

// "auto" | "always" | "never"; an Error naming --progress otherwise.
ProgressLine::When parse_progress_flag(const std::string& text);

}  // namespace plait::cli
