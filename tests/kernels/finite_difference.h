#pragma once
// Helpers for checking backward kernels against central finite differences in double precision
// (h = 1e-6: truncation error ~h^2, rounding ~1e-16/h, both far below the 1e-7 tolerance).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace plait::kernels::testing {

inline std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// d loss / d x_i by central differences, x perturbed in place and restored.
inline std::vector<double> numeric_gradient(const std::function<double()>& loss,
                                            std::vector<double>& x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// max_i |a_i - b_i| / max_i |b_i|: the error relative to the gradient's scale (an elementwise
// relative error is meaningless for entries that are zero by cancellation).
inline double scaled_max_error(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? err / scale : err;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Tolerances: the double kernels against finite differences, and the fp32 kernels against the
// double ones (fp32 rounding through a few operations).
inline constexpr double kGradientTolerance = 1e-7;
inline constexpr double kFloatTolerance = 2e-6;

}  // namespace plait::kernels::testing
