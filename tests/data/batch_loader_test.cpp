#include "plait/data/batch_loader.h"

#include <gtest/gtest.h>

#include <numeric>

#include "plait/data/byte_tokenizer.h"

namespace plait::data {
namespace {

TEST(BatchLoader, TargetsAreInputsShiftedAndBatchesAreDeterministic) {
  std::vector<std::uint16_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 0);
  BatchLoader a(tokens, 16, 2, 4, 42), b(tokens, 16, 2, 4, 42), other(tokens, 16, 2, 4, 43);
  std::vector<std::int32_t> x1(32), y1(32), x2(32), y2(32), x3(32), y3(32);
  a.fill(5, 3, x1.data(), y1.data());
  b.fill(5, 3, x2.data(), y2.data());
  other.fill(5, 3, x3.data(), y3.data());
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(y1, y2);
  EXPECT_NE(x1, x3);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y1[i], x1[i] + 1);
  a.fill(5, 2, x2.data(), y2.data());
  EXPECT_NE(x1, x2);  // different micro-batches differ
}

TEST(ByteTokenizer, RoundTrips) {
  const std::string text = "Hello, plait \xE2\x9C\x93";
  EXPECT_EQ(ByteTokenizer::decode(ByteTokenizer::encode(text)), text);
}

}  // namespace
}  // namespace plait::data
