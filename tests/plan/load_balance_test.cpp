#include <gtest/gtest.h>

#include <numeric>

#include "plait/plan/load_balance.h"

namespace plait::plan {
namespace {

// Micro-batches in proportion to speed (Zorse's n ~ 1/(f + b)), the rest to the fastest, at
// least one each.
TEST(LoadBalance, MicrobatchShares) {
  EXPECT_EQ(microbatch_shares(12, {2, 1}), (std::vector<int>{8, 4}));
  EXPECT_EQ(microbatch_shares(10, {2, 1}), (std::vector<int>{7, 3}));      // 6.67 / 3.33
  EXPECT_EQ(microbatch_shares(4, {1, 1, 1, 1}), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(microbatch_shares(5, {100, 1, 1}), (std::vector<int>{3, 1, 1}));  // one each at least
  EXPECT_EQ(microbatch_shares(7, {1, 3, 2}), (std::vector<int>{1, 4, 2}));    // 1.17 / 3.5 / 2.33
  EXPECT_TRUE(microbatch_shares(2, {1, 1, 1}).empty());
  for (int total = 3; total < 50; ++total) {
    const auto s = microbatch_shares(total, {1.0, 2.5, 0.7});
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), 0), total);
  }
}

// The greedy fill minimises the slowest stage: stages of speed 3, 1, 2 with 12 layers get
// 6, 2, 4 (each 2 time units); the head's extra time on the last stage moves a layer away; a
// memory limit caps a stage; impossible requests return nothing.
TEST(LoadBalance, Layers) {
  const std::vector<double> speed = {3, 1, 2};
  auto time = [&](int s, int l) { return l / speed[s]; };
  auto always = [](int, int) { return true; };
  EXPECT_EQ(balance_layers(12, 3, time, always), (std::vector<int>{6, 2, 4}));
  auto with_head = [&](int s, int l) { return l / speed[s] + (s == 2 ? 1.0 : 0.0); };
  EXPECT_EQ(balance_layers(12, 3, with_head, always), (std::vector<int>{7, 2, 3}));
  auto at_most_4 = [](int s, int l) { return s != 0 || l <= 4; };
  EXPECT_EQ(balance_layers(12, 3, time, at_most_4), (std::vector<int>{4, 3, 5}));
  EXPECT_EQ(balance_layers(12, 3, time, always, 4), (std::vector<int>{4, 4, 4}));
  EXPECT_TRUE(balance_layers(2, 3, time, always).empty());
  EXPECT_TRUE(balance_layers(12, 3, time, [](int, int l) { return l <= 3; }).empty());
  // Brute force on small cases: no split has a smaller largest time.
  for (int layers = 3; layers <= 9; ++layers) {
    const auto got = balance_layers(layers, 3, with_head, always);
    double best = 1e9;
    for (int a = 1; a < layers; ++a) {
      for (int b = 1; a + b < layers; ++b) {
        const int c = layers - a - b;
        best = std::min(best, std::max({with_head(0, a), with_head(1, b), with_head(2, c)}));
      }
    }
    EXPECT_DOUBLE_EQ(std::max({with_head(0, got[0]), with_head(1, got[1]), with_head(2, got[2])}), best) << layers;
  }
}

}  // namespace
}  // namespace plait::plan
