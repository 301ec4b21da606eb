#include "plait/comm/bf16_sum.h"

namespace plait::comm {

void bf16_sum_into(std::span<const bf16> in, std::span<bf16> inout) {
  const std::size_t n = inout.size();
  for (std::size_t i = 0; i < n; ++i) inout[i] = bf16(static_cast<float>(in[i]) + static_cast<float>(inout[i]));
}

}  // namespace plait::comm
