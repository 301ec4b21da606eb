#include "plait/core/segment_lengths.h"

#include <cstdint>
#include <string>

#include "plait/core/error.h"

namespace plait {

std::vector<int> even_segment_lengths(int seq, int k) {
  if (k < 1 || k > seq) {
    throw Error("cannot cut a sequence of " + std::to_string(seq) + " into " + std::to_string(k) +
                " segments");
  }
  std::vector<int> lengths(static_cast<std::size_t>(k), seq / k);
  lengths[0] += seq % k;
  return lengths;
}

std::vector<int> read_segment_lengths(const JsonFields& train, int seq) {
  if (!train.has("segments") || !train.raw("segments").is_array()) {
    return even_segment_lengths(seq, static_cast<int>(train.integer_in("segments", 1, seq, 1)));
  }
  std::vector<int> lengths;
  std::int64_t sum = 0;
  for (std::int64_t len : train.integers("segments")) {
    if (len < 1) train.fail("segments", "segment lengths must be >= 1");
    sum += len;
    lengths.push_back(static_cast<int>(len));
  }
  if (sum != seq) {
    train.fail("segments", "segment lengths sum to " + std::to_string(sum) + ", expected " +
                               train.field_path("seq") + " " + std::to_string(seq));
  }
  return lengths;
}

}  // namespace plait
