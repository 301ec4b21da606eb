#pragma once
// Where every unit of a schedule runs: for each (kind, micro-batch, segment, virtual stage), the
// rank and the position in that rank's list of its first occurrence, and how often it occurs.
// Built in one pass over the action lists into flat arrays, so a stage held by several ranks
// (data parallelism, heterogeneous stages) needs no formula: the action lists say who runs what.
#include <cstdint>
#include <vector>

#include "plait/schedule/schedule.h"

namespace plait::schedule {

class UnitIndex {
 public:
  static constexpr std::int32_t kNone = -1;

  // Actions whose micro-batch, segment or chunk lie outside the layout are skipped (the
  // validator reports them before it trusts the index).
  explicit UnitIndex(const Schedule& schedule);

  // Unit id of (micro-batch, segment, virtual stage): (vstage * m + mb) * k + seg. Stage-major,
  // so one rank's actions touch neighbouring entries (this is what keeps lookups cache-friendly
  // for p = 64, m = 1024, k = 8).
  std::int64_t unit(std::int32_t microbatch, std::int32_t segment, std::int32_t vstage) const {
    return (std::int64_t{vstage} * microbatches_ + microbatch) * segments_ + segment;
  }
  std::int32_t rank(ActionKind kind, std::int64_t unit) const {
    return rank_[slot(kind, unit)];
  }
  std::int32_t position(ActionKind kind, std::int64_t unit) const {
    return position_[slot(kind, unit)];
  }
  // Occurrences of (kind, unit), saturating at 255.
  int count(ActionKind kind, std::int64_t unit) const { return count_[slot(kind, unit)]; }

  // The action that produces the backward input of `unit` (its B, or its BW if fused).
  ActionKind backward_kind(std::int64_t unit) const {
    return count(ActionKind::BW, unit) > 0 ? ActionKind::BW : ActionKind::B;
  }
  std::int64_t num_units() const { return units_; }

 private:
  std::size_t slot(ActionKind kind, std::int64_t unit) const {
    return static_cast<std::size_t>(static_cast<int>(kind) * units_ + unit);
  }
  std::int32_t microbatches_;
  std::int32_t segments_;
  std::int64_t units_;
  std::vector<std::int32_t> rank_;
  std::vector<std::int32_t> position_;
  std::vector<std::uint8_t> count_;
};

}  // namespace plait::schedule
