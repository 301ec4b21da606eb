#pragma once
// Deterministic batches from a token stream. Sample n of the run (n = step * samples_per_step +
// index within the step) is the window starting at a position drawn from (seed, n) alone, so
// any rank can produce any micro-batch without coordination, and resuming at step s needs only
// s: the loader has no hidden position.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/data/batch_source.h"

namespace plait::data {

class BatchLoader : public BatchSource {
 public:
  // tokens: the stream (kept by reference; must outlive the loader). Needs > seq tokens.
  BatchLoader(std::span<const std::uint16_t> tokens, int seq, int microbatch_size,
              int microbatches_per_step, std::uint64_t seed);

  // inputs, targets: microbatch_size x seq, row-major; targets are inputs shifted by one.
  // microbatch: the global micro-batch index within the step, in [0, microbatches_per_step).
  void fill(std::int64_t step, int microbatch, std::int32_t* inputs,
            std::int32_t* targets) const override;

  int seq() const override { return seq_; }
  int microbatch_size() const override { return microbatch_size_; }
  int microbatches_per_step() const override { return microbatches_per_step_; }

 private:
  std::span<const std::uint16_t> tokens_;
  int seq_;
  int microbatch_size_;
  int microbatches_per_step_;
  std::uint64_t seed_;
};

}  // namespace plait::data
