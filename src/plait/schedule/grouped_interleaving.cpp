#include "plait/schedule/grouped_interleaving.h"

#include "plait/schedule/layout.h"
#include "plait/schedule/one_f_one_b_pattern.h"

namespace plait::schedule {

std::vector<int> interleaving_groups(int microbatches, int group) {
  if (microbatches < group) return {microbatches};
  const int n = microbatches / group;
  std::vector<int> sizes(n, group);
  for (int extra = 0; extra < microbatches - n * group; ++extra) ++sizes[extra % n];
  return sizes;
}

int grouped_interleaving_in_flight(const PipelineShape& shape, int rank) {
  const int p = shape.stages, v = shape.chunks, k = shape.segments;
  const int first_group = interleaving_groups(shape.microbatches, (p + k - 1) / k).front();
  return 2 * (p - rank - 1) + (v - 1) * first_group * k + (k - 1) + 1;
}

Schedule grouped_interleaving(const PipelineShape& shape) {
  return grouped_interleaving(shape, BackwardStyle{}, nullptr);
}

Schedule grouped_interleaving(const PipelineShape& shape, const BackwardStyle& style,
                              int (*w_lag_of_rank)(const PipelineShape& shape, int rank)) {
  const int p = shape.stages, v = shape.chunks, m = shape.microbatches, k = shape.segments;
  Schedule schedule = empty_schedule(interleaved_layout(p, v, m, k));
  const int min_group = (p + k - 1) / k;
  const std::vector<int> groups = interleaving_groups(m, min_group);
  std::vector<Action> forwards, backwards;
  forwards.reserve(static_cast<std::size_t>(m) * v * k);
  backwards.reserve(forwards.capacity());
  int first_mb = 0;
  for (int size : groups) {
    for (int c = 0; c < v; ++c) {
      for (int mb = first_mb; mb < first_mb + size; ++mb) {
        for (int seg = 0; seg < k; ++seg) forwards.push_back({ActionKind::F, mb, seg, c});
      }
    }
    for (int c = v - 1; c >= 0; --c) {
      for (int mb = first_mb; mb < first_mb + size; ++mb) {
        for (int seg = k - 1; seg >= 0; --seg) backwards.push_back({ActionKind::BW, mb, seg, c});
      }
    }
    first_mb += size;
  }
  for (int r = 0; r < p; ++r) {
    const int warmup = grouped_interleaving_in_flight(shape, r) - 1;
    BackwardStyle rank_style = style;
    if (w_lag_of_rank) rank_style.w_lag = w_lag_of_rank(shape, r);
    schedule.ranks[r] = one_f_one_b_pattern(forwards, backwards, warmup, rank_style);
  }
  return schedule;
}

}  // namespace plait::schedule
