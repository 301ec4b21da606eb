#pragma once
// One transformer layer's time against the work it is given, fitted to measured samples (Zorse's
// model_latencies.json, or `plait profile`'s table of this machine): forward or backward
// milliseconds at micro-batch sizes 1..N of one sequence length.
//
// The form: a fixed cost plus a rate, with at most one change of rate (a knee),
//   t(x) = fixed + slope * x                                   for x <= knee
//   t(x) = fixed + slope * knee + slope_after * (x - knee)     for x >  knee
// with x the work in samples of the measured sequence. Why this form (docs/simulator.md, "Device
// curves"): a fixed cost and a rate is the saturating efficiency of a kernel, eff(x) = x / (x + x0)
// with x0 = fixed / slope (latency + size / bandwidth, Hockney's model applied to compute): it is
// what Zorse fits and what most GPU types in its tables show (throughput saturates by b = 2..4).
// Some types slow down again under sustained load (the 72 W L4 loses 10-20% of its throughput from
// b = 1 to 16, so its time grows faster than linearly); one knee captures that without a model of
// the power limit. The knee is kept only where the Bayesian information criterion says it pays
// for its two extra parameters, so noisy types fall back to the straight line.
#include <limits>
#include <span>

namespace plait::sim {

struct LatencyCurve {
  double fixed = 0;  // seconds at zero work (may be negative when the time grows superlinearly)
  double slope = 0;  // seconds per sample up to the knee
  double knee = std::numeric_limits<double>::infinity();  // samples; infinity: a straight line
  double slope_after = 0;                                 // seconds per sample beyond the knee

  bool has_knee() const { return knee < std::numeric_limits<double>::infinity(); }
  // Seconds for x samples of work. A negative fixed cost is not extrapolated below one sample
  // (a short segment would cost nothing or less): there the time is x * t(1).
  double at(double x) const;
  // d t / d x at x (seconds per sample): the rate of extra work there.
  double marginal(double x) const;
};

// A straight line (Zorse's own fit: slope and intercept in seconds).
LatencyCurve line_curve(double slope, double intercept);

// The straight line through (samples[i], seconds[i]), least squares in relative error; one
// sample: proportional.
LatencyCurve fit_straight_curve(std::span<const double> samples, std::span<const double> seconds);

// The curve through (samples[i], seconds[i]), least squares in relative error (weights 1 / t^2,
// so small and large micro-batches count alike), the knee at one of the sample sizes (at least
// three sizes up to it and two beyond) when it lowers the information criterion
// n ln(SSE / n) + p ln n with p = 4 (fixed, slope, knee, slope after) against p = 2 for the line;
// both rates must stay positive. Fewer than five samples: the line (two: through both; one:
// proportional).
LatencyCurve fit_latency_curve(std::span<const double> samples, std::span<const double> seconds);

}  // namespace plait::sim
