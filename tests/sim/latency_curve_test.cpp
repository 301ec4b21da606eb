#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "plait/sim/latency_curve.h"
#include "plait/sim/latency_validation.h"
#include "plait/sim/shipped_data.h"

#include <nlohmann/json.hpp>

namespace plait::sim {
namespace {

std::vector<double> sizes(int n) {
  std::vector<double> b;
  for (int i = 1; i <= n; ++i) b.push_back(i);
  return b;
}

// A straight line is recovered exactly and takes no knee.
TEST(LatencyCurve, FitsAStraightLineWithoutAKnee) {
  const std::vector<double> b = sizes(16);
  std::vector<double> t;
  for (double x : b) t.push_back(0.002 + 0.010 * x);
  const LatencyCurve c = fit_latency_curve(b, t);
  EXPECT_FALSE(c.has_knee());
  EXPECT_NEAR(c.fixed, 0.002, 1e-12);
  EXPECT_NEAR(c.slope, 0.010, 1e-12);
  EXPECT_NEAR(c.at(0.5), 0.007, 1e-12);  // half a sample still pays the fixed cost
}

// A rate that changes at b = 8 (a device slowing down under load) is found, with both rates.
TEST(LatencyCurve, FindsAKneeWhereTheRateChanges) {
  const std::vector<double> b = sizes(16);
  std::vector<double> t;
  for (double x : b) t.push_back(0.001 + 0.010 * std::min(x, 8.0) + 0.013 * std::max(0.0, x - 8.0));
  const LatencyCurve c = fit_latency_curve(b, t);
  ASSERT_TRUE(c.has_knee());
  EXPECT_DOUBLE_EQ(c.knee, 8.0);
  EXPECT_NEAR(c.slope, 0.010, 1e-9);
  EXPECT_NEAR(c.slope_after, 0.013, 1e-9);
  EXPECT_NEAR(c.at(12), t[11], 1e-9);
  EXPECT_NEAR(c.marginal(12), 0.013, 1e-9);
}

// Noise around a line does not buy a knee: the information criterion keeps the line.
TEST(LatencyCurve, NoiseDoesNotBuyAKnee) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.002);
  int knees = 0;
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<double> b = sizes(16);
    std::vector<double> t;
    for (double x : b) t.push_back((0.003 + 0.010 * x) * (1 + noise(rng)));
    knees += fit_latency_curve(b, t).has_knee();
  }
  EXPECT_LE(knees, 5);  // BIC's false-knee rate here is a few per cent
}

// A negative fixed cost (time growing faster than the work) is not extrapolated below one sample.
TEST(LatencyCurve, NegativeFixedCostIsProportionalBelowOneSample) {
  const LatencyCurve c = line_curve(0.010, -0.002);
  EXPECT_NEAR(c.at(1), 0.008, 1e-12);
  EXPECT_NEAR(c.at(0.25), 0.25 * 0.008, 1e-12);
  EXPECT_GT(c.at(0.01), 0);
}

// Held out, the curve predicts kinked data exactly where a line cannot.
TEST(LatencyCurve, HeldOutErrorsOfKinkedData) {
  std::vector<double> ms;
  for (int b = 1; b <= 16; ++b) ms.push_back(1.0 + 10.0 * std::min(b, 7) + 14.0 * std::max(0, b - 7));
  const HeldOutErrors in = held_out_errors(ms, HoldOut::interpolate);
  ASSERT_EQ(in.curve.size(), 7u);  // b = 2, 4, ..., 14 (16 is fitted)
  EXPECT_LT(in.mean(in.curve), 1e-9);
  EXPECT_GT(in.mean(in.line), 0.01);
  EXPECT_TRUE(held_out_errors({1, 2, 3}, HoldOut::interpolate).curve.empty());
}

// Across sequences: a device whose layer time is exactly fixed + rate x FLOPs is predicted at a
// shorter sequence by the longest sequence's curve, the work scaled by FLOPs; its table line,
// with a negative intercept, is not.
TEST(LatencyCurve, AcrossSequencesScalesTheWorkByFlops) {
  const nlohmann::json stats = {{"m", {{"hidden_size", 1024}, {"parameters_per_layer", 12.0 * 1024 * 1024}}}};
  auto flops = [](double seq) { return 2.0 * seq * 12.0 * 1024 * 1024 + 2.0 * 1024 * seq * seq; };
  LatencyTable table;
  for (std::int64_t seq : {512, 2048}) {
    LatencyEntry e;
    e.model = "m";
    e.device = "gpu";
    e.dtype = "float16";
    e.seq = seq;
    for (int b = 1; b <= 8; ++b) {
      e.forward_ms.push_back(0.5 + 2e-12 * b * flops(static_cast<double>(seq)));
      e.backward_ms.push_back(1.0 + 4e-12 * b * flops(static_cast<double>(seq)));
    }
    e.forward_slope_ms = 2e-12 * flops(static_cast<double>(seq)) * 1.2;  // a poorer line
    e.forward_intercept_ms = -0.4;
    e.backward_slope_ms = 4e-12 * flops(static_cast<double>(seq));
    e.backward_intercept_ms = 1.0;
    table.entries.push_back(e);
  }
  const std::vector<DeviceValidation> rows = validate_across_sequences(table, stats);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].entries, 1);
  EXPECT_EQ(rows[0].forward.curve.size(), 8u);
  EXPECT_LT(rows[0].both().mean(rows[0].both().curve), 1e-9);
  EXPECT_GT(rows[0].forward.mean(rows[0].forward.line), 0.05);
}

// The shipped Zorse table: every GPU type is either validated or listed as without samples, and
// every validated row has held-out points for forward and backward.
TEST(LatencyCurve, EveryZorseTypeIsValidatedOrListed) {
  const LatencyTable table = read_latency_table(shipped_data_path("profiles/zorse/model_latencies.json"), false);
  const std::vector<DeviceValidation> rows = validate_latency_curves(table, HoldOut::interpolate);
  std::set<std::string> seen;
  for (const DeviceValidation& v : rows) {
    seen.insert(v.device);
    EXPECT_GT(v.entries, 0) << v.device;
    EXPECT_FALSE(v.forward.curve.empty()) << v.device;
    EXPECT_FALSE(v.backward.curve.empty()) << v.device;
  }
  for (const std::string& d : devices_without_samples(table)) EXPECT_TRUE(seen.insert(d).second) << d;
  EXPECT_EQ(seen, std::set<std::string>(table.devices.begin(), table.devices.end()));
  EXPECT_EQ(seen.size(), 17u);  // Zorse's 17 GPU types (../shared/reference/zorse.md)
}

}  // namespace
}  // namespace plait::sim
