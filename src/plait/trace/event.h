#pragma once
// One timed thing that happened on a rank: a compute action (F, B, W, BW of a micro-batch,
// segment and chunk) or a message (send of an activation or gradient to a peer). The simulator
// produces these, and the runtime will record the same type from measured runs, so both go
// through the same writers and can be laid side by side.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plait/schedule/action.h"

namespace plait::trace {

enum class EventKind : std::uint8_t { F = 0, B = 1, W = 2, BW = 3, send = 4 };

EventKind event_kind(schedule::ActionKind kind);
bool is_compute(EventKind kind);
const char* event_kind_name(EventKind kind);

struct Event {
  std::int32_t rank = 0;
  EventKind kind = EventKind::F;
  std::int32_t microbatch = 0;
  std::int32_t segment = 0;
  std::int32_t chunk = 0;
  double start = 0.0;  // seconds from the start of the step
  double end = 0.0;
  // Messages only: the receiving rank, the size, and whether it carries a gradient.
  std::int32_t peer = -1;
  std::int64_t bytes = 0;
  bool gradient = false;
};

struct Timeline {
  std::string title;
  int num_ranks = 0;
  int num_segments = 1;
  int max_chunks = 1;
  // Optional row labels ("rank 3: stages 3, 12"); "rank r" when empty.
  std::vector<std::string> rank_labels;
  // Key/value lines shown above the timeline (step time, bubble, device, ...).
  std::vector<std::pair<std::string, std::string>> summary;
  std::vector<Event> events;

  std::string rank_label(int rank) const;
  double end_time() const;
};

}  // namespace plait::trace
