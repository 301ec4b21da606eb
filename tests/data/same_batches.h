#pragma once
// Two loaders of packed sequences give the same batches: every micro-batch's tokens, targets and
// document layout over a range of steps (a resumed loader against the uninterrupted one).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "plait/data/sequential_loader.h"

namespace plait::data::test {

// `tokens`: the rows x seq of a micro-batch.
inline void expect_same_batches(const SequentialLoader& first, const SequentialLoader& resumed, std::int64_t from,
                                std::int64_t to, int microbatches, std::size_t tokens) {
  std::vector<std::int32_t> x1(tokens), y1(tokens), x2(tokens), y2(tokens);
  for (std::int64_t step = from; step < to; ++step) {
    for (int g = 0; g < microbatches; ++g) {
      first.fill(step, g, x1.data(), y1.data());
      resumed.fill(step, g, x2.data(), y2.data());
      ASSERT_EQ(x1, x2) << "step " << step << ", micro-batch " << g;
      ASSERT_EQ(y1, y2) << "step " << step << ", micro-batch " << g;
      ASSERT_EQ(first.documents(step, g), resumed.documents(step, g));
    }
  }
}

}  // namespace plait::data::test
