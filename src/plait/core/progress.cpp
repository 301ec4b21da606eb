#include "plait/core/progress.h"

#include <mutex>

namespace plait {
namespace {

struct Board {
  std::mutex mutex;
  std::uint64_t count = 0;
  std::string doing, waiting;
};

Board& board() {
  static Board b;
  return b;
}

void assign(std::string& line, std::string_view text) {
  line.assign(text.substr(0, kProgressLineChars));  // reuses the string's capacity
}

}  // namespace

void note_progress(std::string_view doing) {
  Board& b = board();
  const std::lock_guard lock(b.mutex);
  ++b.count;
  if (!doing.empty()) assign(b.doing, doing);
}

void note_waiting(std::string_view on) {
  Board& b = board();
  const std::lock_guard lock(b.mutex);
  assign(b.waiting, on);
}

void note_wait_over() {
  Board& b = board();
  const std::lock_guard lock(b.mutex);
  ++b.count;
  b.waiting.clear();
}

ProgressSnapshot progress_snapshot() {
  Board& b = board();
  const std::lock_guard lock(b.mutex);
  return {b.count, b.doing, b.waiting};
}

}  // namespace plait
