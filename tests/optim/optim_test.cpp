#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "plait/core/memory_tracker.h"
#include "plait/kernels/grad_norm.h"
#include "plait/model/parameter_layout.h"
#include "plait/optim/adamw.h"
#include "plait/optim/grad_clip.h"
#include "plait/optim/lr_schedule.h"

namespace plait::optim {
namespace {

TEST(LRSchedule, WarmsUpLinearlyThenFollowsTheCosineToTheFloor) {
  const LRSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);                // cosine starts at the top
  EXPECT_NEAR(s.at(60), 0.1 + 0.5 * 0.9, 1e-12);  // halfway: the mean of max and min
  EXPECT_NEAR(s.at(109), 0.1 + 0.5 * (1 + std::cos(M_PI * 99 / 100)) * 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(500), 0.1);
  const LRSchedule no_warmup{2.0, 0.0, 0, 4};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 2.0);
}

TEST(GradClip, GlobalNormFromPiecesAndTheClippingFactor) {
  const std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};
  const std::vector<double> pieces = {kernels::sum_of_squares(a.data(), a.size()),
                                      kernels::sum_of_squares(b.data(), b.size())};
  const ClipResult r = clip_by_global_norm(pieces, 1.0);
  EXPECT_DOUBLE_EQ(r.norm, 5.0);
  EXPECT_NEAR(r.factor, 1.0 / (5.0 + 1e-6), 1e-15);
  EXPECT_DOUBLE_EQ(clip_by_global_norm(pieces, 10.0).factor, 1.0);
  EXPECT_DOUBLE_EQ(clip_by_global_norm(pieces, 0.0).factor, 1.0);
}

TEST(AdamW, DecaysOnlyMarkedRangesAndKeepsMomentsInOptimizerState) {
  const std::vector<model::NamedTensor> tensors = {
      {"w", {2, 2}, 0, 4, true, {}}, {"w1", {2, 2}, 16, 4, true, {}}, {"b", {2}, 32, 2, false, {}}};
  const auto ranges = param_ranges(tensors);
  ASSERT_EQ(ranges.size(), 2u);  // w and w1 merge across their padding
  EXPECT_EQ(ranges[0].count, 20u);
  EXPECT_EQ(ranges[1].offset, 32u);
  EXPECT_FALSE(ranges[1].weight_decay);

  MemoryTracker tracker;
  std::vector<float> p(48, 1.0f), g(48, 0.0f);
  AdamW opt(p, ranges, {0.9, 0.95, 1e-8, 0.5}, tracker);
  EXPECT_EQ(tracker.current(MemoryCategory::kOptimizerState), 2 * 48 * sizeof(float));
  opt.step(g, 0.1);  // zero gradient: only the decay moves parameters
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(p[8], 1.0f - 0.1f * 0.5f);  // (padding is zero in real layouts)
  EXPECT_FLOAT_EQ(p[16], 1.0f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(p[32], 1.0f);
  EXPECT_FLOAT_EQ(p[40], 1.0f);  // outside every range
  EXPECT_EQ(opt.steps_taken(), 1);

  // First step with a gradient: m/(1-b1) = g, v/(1-b2) = g^2, so the step is lr * sign(g).
  std::vector<float> q(48, 0.0f), gq(48, 0.0f);
  gq[33] = 3.0f;
  AdamW opt2(q, ranges, {0.9, 0.95, 1e-8, 0.0}, tracker);
  opt2.step(gq, 0.01, 0.5);
  EXPECT_NEAR(q[33], -0.01, 1e-7);
  EXPECT_NEAR(opt2.first_moment()[33], 0.1 * 1.5, 1e-7);  // the scaled gradient went in
}

}  // namespace
}  // namespace plait::optim
