#include "plait/schedule/unit_index.h"

namespace plait::schedule {

UnitIndex::UnitIndex(const Schedule& schedule)
    : microbatches_(schedule.layout.num_microbatches),
      segments_(schedule.layout.num_segments),
      units_(schedule.layout.num_units()) {
  const std::size_t slots = static_cast<std::size_t>(kNumActionKinds * units_);
  rank_.assign(slots, kNone);
  position_.assign(slots, kNone);
  count_.assign(slots, 0);
  const Layout& layout = schedule.layout;
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    const auto& actions = schedule.ranks[r];
    const int chunks = r < layout.num_ranks() ? layout.num_chunks(r) : 0;
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (a.chunk < 0 || a.chunk >= chunks || a.microbatch < 0 ||
          a.microbatch >= layout.num_microbatches || a.segment < 0 ||
          a.segment >= layout.num_segments) {
        continue;
      }
      const std::size_t s = slot(a.kind, unit(a.microbatch, a.segment, layout.vstage(r, a.chunk)));
      if (count_[s] == 0) {
        rank_[s] = r;
        position_[s] = static_cast<std::int32_t>(i);
      }
      if (count_[s] < 255) ++count_[s];
    }
  }
}

}  // namespace plait::schedule
