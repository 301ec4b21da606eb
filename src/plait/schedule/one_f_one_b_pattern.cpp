#include "plait/schedule/one_f_one_b_pattern.h"

#include <algorithm>
#include <deque>

namespace plait::schedule {

std::vector<Action> one_f_one_b_pattern(std::span<const Action> forwards,
                                        std::span<const Action> backwards, int warmup,
                                        const BackwardStyle& style) {
  const std::size_t n = forwards.size();
  const std::size_t w = std::min<std::size_t>(static_cast<std::size_t>(std::max(warmup, 0)), n);
  std::vector<Action> out;
  out.reserve(n + backwards.size() * (style.split ? 2 : 1));
  std::deque<Action> pending_w;
  auto backward = [&](Action a) {
    a.kind = style.split ? ActionKind::B : ActionKind::BW;
    out.push_back(a);
    if (style.split) {
      a.kind = ActionKind::W;
      pending_w.push_back(a);
    }
  };
  auto weight = [&] {
    out.push_back(pending_w.front());
    pending_w.pop_front();
  };
  for (std::size_t i = 0; i < w; ++i) out.push_back(forwards[i]);
  std::size_t next_b = 0;
  for (std::size_t i = 0; w + i < n; ++i) {
    out.push_back(forwards[w + i]);
    backward(backwards[next_b++]);
    if (style.split && static_cast<int>(i) >= style.w_lag) weight();
  }
  while (next_b < backwards.size()) {
    backward(backwards[next_b++]);
    if (style.split) weight();
  }
  while (!pending_w.empty()) weight();
  return out;
}

std::vector<Action> sequence_forward_order(int microbatches, int segments, int chunk) {
  std::vector<Action> order;
  order.reserve(static_cast<std::size_t>(microbatches) * segments);
  for (int mb = 0; mb < microbatches; ++mb) {
    for (int seg = 0; seg < segments; ++seg) order.push_back({ActionKind::F, mb, seg, chunk});
  }
  return order;
}

std::vector<Action> sequence_backward_order(int microbatches, int segments, int chunk) {
  std::vector<Action> order;
  order.reserve(static_cast<std::size_t>(microbatches) * segments);
  for (int mb = 0; mb < microbatches; ++mb) {
    for (int seg = segments - 1; seg >= 0; --seg) order.push_back({ActionKind::BW, mb, seg, chunk});
  }
  return order;
}

}  // namespace plait::schedule
