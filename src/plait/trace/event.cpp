#include "plait/trace/event.h"

#include <algorithm>

namespace plait::trace {

EventKind event_kind(schedule::ActionKind kind) {
  switch (kind) {
    case schedule::ActionKind::F: return EventKind::F;
    case schedule::ActionKind::B: return EventKind::B;
    case schedule::ActionKind::W: return EventKind::W;
    case schedule::ActionKind::BW: return EventKind::BW;
  }
  return EventKind::F;
}

bool is_compute(EventKind kind) { return kind != EventKind::send; }

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::F: return "F";
    case EventKind::B: return "B";
    case EventKind::W: return "W";
    case EventKind::BW: return "BW";
    case EventKind::send: return "send";
  }
  return "?";
}

std::string Timeline::rank_label(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(rank_labels.size()) && !rank_labels[rank].empty()) {
    return rank_labels[rank];
  }
  return "rank " + std::to_string(rank);
}

double Timeline::end_time() const {
  double end = 0.0;
  for (const Event& e : events) end = std::max(end, e.end);
  return end;
}

}  // namespace plait::trace
