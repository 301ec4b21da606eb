#include "plait/schedule/layout.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"

namespace plait::schedule {

int Layout::max_chunks() const {
  int v = 0;
  for (const auto& chunks : rank_vstages) v = std::max(v, static_cast<int>(chunks.size()));
  return v;
}

const char* placement_name(StagePlacement placement) {
  switch (placement) {
    case StagePlacement::contiguous: return "contiguous";
    case StagePlacement::interleaved: return "interleaved";
    case StagePlacement::v_shape: return "v-shape";
  }
  return "?";
}

std::int32_t placed_vstage(StagePlacement placement, int positions, int position, int chunk) {
  if (placement == StagePlacement::v_shape) return chunk == 0 ? position : 2 * positions - 1 - position;
  return chunk * positions + position;
}

int placed_position(StagePlacement placement, int positions, std::int32_t vstage) {
  if (placement == StagePlacement::v_shape) return vstage < positions ? vstage : 2 * positions - 1 - vstage;
  return vstage % positions;
}

Layout placed_layout(StagePlacement placement, int ranks, int chunks, int microbatches, int segments) {
  Layout layout;
  layout.rank_vstages.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (int c = 0; c < chunks; ++c) layout.rank_vstages[r].push_back(placed_vstage(placement, ranks, r, c));
  }
  layout.num_vstages = ranks * chunks;
  layout.num_microbatches = microbatches;
  layout.num_segments = segments;
  return layout;
}

Layout interleaved_layout(int ranks, int chunks, int microbatches, int segments) {
  return placed_layout(StagePlacement::interleaved, ranks, chunks, microbatches, segments);
}

Layout v_shape_layout(int ranks, int microbatches, int segments) {
  return placed_layout(StagePlacement::v_shape, ranks, 2, microbatches, segments);
}

bool is_interleaved_layout(const Layout& layout) {
  const int p = layout.num_ranks();
  const int v = layout.max_chunks();
  if (layout.num_vstages != p * v) return false;
  for (int r = 0; r < p; ++r) {
    if (layout.num_chunks(r) != v) return false;
    for (int c = 0; c < v; ++c) {
      if (layout.vstage(r, c) != placed_vstage(StagePlacement::interleaved, p, r, c)) return false;
    }
  }
  return true;
}

void check_layout(const Layout& layout) {
  if (layout.num_ranks() == 0) throw Error("schedule layout: no ranks");
  if (layout.num_microbatches < 1) {
    throw Error("schedule layout: expected at least 1 micro-batch, found " +
                std::to_string(layout.num_microbatches));
  }
  if (layout.num_segments < 1) {
    throw Error("schedule layout: expected at least 1 segment, found " +
                std::to_string(layout.num_segments));
  }
  if (layout.num_vstages < 1) throw Error("schedule layout: no virtual stages");
  std::vector<char> held(layout.num_vstages, 0);
  for (int r = 0; r < layout.num_ranks(); ++r) {
    if (layout.num_chunks(r) == 0) {
      throw Error("schedule layout: rank " + std::to_string(r) + " holds no virtual stage");
    }
    for (int c = 0; c < layout.num_chunks(r); ++c) {
      const std::int32_t s = layout.vstage(r, c);
      if (s < 0 || s >= layout.num_vstages) {
        throw Error("schedule layout: rank " + std::to_string(r) + " chunk " + std::to_string(c) +
                    ": virtual stage " + std::to_string(s) + " is outside [0, " +
                    std::to_string(layout.num_vstages) + ")");
      }
      for (int c2 = 0; c2 < c; ++c2) {
        if (layout.vstage(r, c2) == s) {
          throw Error("schedule layout: rank " + std::to_string(r) + " holds virtual stage " +
                      std::to_string(s) + " twice (chunks " + std::to_string(c2) + " and " +
                      std::to_string(c) + ")");
        }
      }
      held[s] = 1;
    }
  }
  for (int s = 0; s < layout.num_vstages; ++s) {
    if (!held[s]) {
      throw Error("schedule layout: no rank holds virtual stage " + std::to_string(s));
    }
  }
}

}  // namespace plait::schedule
