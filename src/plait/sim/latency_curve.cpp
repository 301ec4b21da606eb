#include "plait/sim/latency_curve.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

namespace plait::sim {

double LatencyCurve::at(double x) const {
  if (fixed < 0 && x < 1) return x * at(1.0);
  if (x <= knee) return fixed + slope * x;
  return fixed + slope * knee + slope_after * (x - knee);
}

double LatencyCurve::marginal(double x) const { return x <= knee ? slope : slope_after; }

LatencyCurve line_curve(double slope, double intercept) {
  LatencyCurve c;
  c.fixed = intercept;
  c.slope = slope;
  return c;
}

namespace {

// Weighted least squares over the columns of `rows` (n x N, N <= 3): the coefficients, or none
// when the normal equations are singular.
template <std::size_t N>
std::optional<std::array<double, N>> least_squares(const std::vector<std::array<double, N>>& rows,
                                                   std::span<const double> y, const std::vector<double>& w) {
  std::array<std::array<double, N + 1>, N> a{};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t r = 0; r < N; ++r) {
      for (std::size_t c = 0; c < N; ++c) a[r][c] += w[i] * rows[i][r] * rows[i][c];
      a[r][N] += w[i] * rows[i][r] * y[i];
    }
  }
  // Gaussian elimination with partial pivoting.
  for (std::size_t i = 0; i < N; ++i) {
    std::size_t pivot = i;
    for (std::size_t r = i + 1; r < N; ++r) {
      if (std::fabs(a[r][i]) > std::fabs(a[pivot][i])) pivot = r;
    }
    std::swap(a[i], a[pivot]);
    if (std::fabs(a[i][i]) < 1e-300) return std::nullopt;
    for (std::size_t r = 0; r < N; ++r) {
      if (r == i) continue;
      const double f = a[r][i] / a[i][i];
      for (std::size_t c = i; c <= N; ++c) a[r][c] -= f * a[i][c];
    }
  }
  std::array<double, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = a[i][N] / a[i][i];
  return out;
}

// Weighted squared error of `curve` on the samples.
double weighted_error(const LatencyCurve& curve, std::span<const double> x, std::span<const double> y,
                      const std::vector<double>& w) {
  double sse = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    // The straight part of the form, without at()'s rule below one sample (a fit sees raw values).
    const double t = x[i] <= curve.knee ? curve.fixed + curve.slope * x[i]
                                        : curve.fixed + curve.slope * curve.knee + curve.slope_after * (x[i] - curve.knee);
    sse += w[i] * (t - y[i]) * (t - y[i]);
  }
  return sse;
}

// Weights 1 / t^2: least squares in relative error.
std::vector<double> relative_weights(std::span<const double> seconds) {
  std::vector<double> w(seconds.size());
  for (std::size_t i = 0; i < seconds.size(); ++i) w[i] = seconds[i] != 0 ? 1.0 / (seconds[i] * seconds[i]) : 1.0;
  return w;
}

}  // namespace

LatencyCurve fit_straight_curve(std::span<const double> samples, std::span<const double> seconds) {
  const std::size_t n = std::min(samples.size(), seconds.size());
  if (n == 0) return {};
  const LatencyCurve proportional = line_curve(seconds[0] / samples[0], 0.0);
  if (n == 1) return proportional;
  std::vector<std::array<double, 2>> rows;
  for (std::size_t i = 0; i < n; ++i) rows.push_back({1.0, samples[i]});
  const auto line = least_squares<2>(rows, seconds.first(n), relative_weights(seconds.first(n)));
  return line ? line_curve((*line)[1], (*line)[0]) : proportional;
}

LatencyCurve fit_latency_curve(std::span<const double> samples, std::span<const double> seconds) {
  const std::size_t n = std::min(samples.size(), seconds.size());
  LatencyCurve best = fit_straight_curve(samples, seconds);
  if (n < 4) return best;
  const std::vector<double> w = relative_weights(seconds.first(n));

  // The information criterion n ln(SSE/n) + p ln n of each candidate (p: its parameters).
  const double dn = static_cast<double>(n);
  auto criterion = [&](const LatencyCurve& c, double parameters) {
    const double sse = std::max(weighted_error(c, samples.first(n), seconds.first(n), w), 1e-300);
    return dn * std::log(sse / dn) + parameters * std::log(dn);
  };
  double best_score = criterion(best, 2);
  std::vector<double> sizes(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(sizes.begin(), sizes.end());
  // A knee leaves at least three sizes up to it and two beyond, so neither rate rests on one
  // interval (a knee fitted to the last pair of points extrapolates its noise).
  for (std::size_t k = 2; k + 2 < sizes.size(); ++k) {
    const double knee = sizes[k];
    std::vector<std::array<double, 3>> rows;
    for (std::size_t i = 0; i < n; ++i) rows.push_back({1.0, samples[i], std::max(0.0, samples[i] - knee)});
    const auto fit = least_squares<3>(rows, seconds.first(n), w);
    if (!fit || !((*fit)[1] > 0) || !((*fit)[1] + (*fit)[2] > 0)) continue;
    LatencyCurve c;
    c.fixed = (*fit)[0];
    c.slope = (*fit)[1];
    c.knee = knee;
    c.slope_after = (*fit)[1] + (*fit)[2];
    const double score = criterion(c, 4);
    if (score < best_score) {
      best = c;
      best_score = score;
    }
  }
  return best;
}

}  // namespace plait::sim
