#include "plait/data/segment_columns.h"

namespace plait::data {

void segment_columns(const std::vector<std::int32_t>& all, int rows, int seq, int start, int length,
                     std::vector<std::int32_t>& out) {
  out.resize(static_cast<std::size_t>(rows) * length);
  for (int r = 0; r < rows; ++r) {
    for (int t = 0; t < length; ++t) {
      out[static_cast<std::size_t>(r) * length + t] = all[static_cast<std::size_t>(r) * seq + start + t];
    }
  }
}

}  // namespace plait::data
