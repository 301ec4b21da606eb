#pragma once
// What this process is doing, for the stall watchdog (comm/watchdog.h): a counter that moves
// whenever the process gets somewhere (an action done, a wait over, a file block read or
// written) and two short lines: what it is doing, and what it waits for while it waits. Any
// module marks progress where its long loops and waits are; only the watchdog reads it. One per
// process, as the MPI session is. Cheap enough per compute action: a lock and a short copy
// (lines are cut at kProgressLineChars bytes).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace plait {

inline constexpr std::size_t kProgressLineChars = 200;

// Moves the counter; a non-empty `doing` replaces the activity line ("step 3: F1.2 on stage 1").
void note_progress(std::string_view doing = {});
// The process starts waiting for `on` ("receive of 2048 floats from rank 1 (tag 7)"); the wait
// line stays until note_wait_over(), which also moves the counter.
void note_waiting(std::string_view on);
void note_wait_over();

struct ProgressSnapshot {
  std::uint64_t count = 0;
  std::string doing;
  std::string waiting;  // "" when not waiting
};
ProgressSnapshot progress_snapshot();

}  // namespace plait
