#include "plait/data/batch_loader.h"

#include <string>

#include "plait/core/error.h"
#include "plait/core/splitmix64.h"

namespace plait::data {

BatchLoader::BatchLoader(std::span<const std::uint16_t> tokens, int seq, int microbatch_size,
                         int microbatches_per_step, std::uint64_t seed)
    : tokens_(tokens),
      seq_(seq),
      microbatch_size_(microbatch_size),
      microbatches_per_step_(microbatches_per_step),
      seed_(seed) {
  if (seq <= 0 || microbatch_size <= 0 || microbatches_per_step <= 0) {
    throw Error("BatchLoader: seq, microbatch size and micro-batches must be positive");
  }
  if (tokens.size() < static_cast<std::size_t>(seq) + 1) {
    throw Error("BatchLoader: the corpus has " + std::to_string(tokens.size()) +
                " tokens, fewer than sequence length + 1 = " + std::to_string(seq + 1));
  }
}

void BatchLoader::fill(std::int64_t step, int microbatch, std::int32_t* inputs,
                       std::int32_t* targets) const {
  const std::uint64_t starts = tokens_.size() - static_cast<std::size_t>(seq_);
  for (int b = 0; b < microbatch_size_; ++b) {
    const std::uint64_t n =
        (static_cast<std::uint64_t>(step) * microbatches_per_step_ + microbatch) *
            microbatch_size_ + b;
    const std::uint64_t start = splitmix64(seed_ ^ splitmix64(n)) % starts;
    for (int t = 0; t < seq_; ++t) {
      inputs[b * seq_ + t] = tokens_[start + t];
      targets[b * seq_ + t] = tokens_[start + t + 1];
    }
  }
}

}  // namespace plait::data
