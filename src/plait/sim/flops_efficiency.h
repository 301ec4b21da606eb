#pragma once
// A FLOP/s device profile built from independent sources: the datasheet peak of the device times
// an efficiency measured against the work of one layer's action, eff(F) = F / (peak * t(F)),
// instead of one sustained figure (which a pipeline's throughput would give with its bubble
// counted in). t is a device curve (latency_curve.h) over FLOPs, fitted to measured per-layer
// times pooled over every model and sequence a GPU type was measured with, so the efficiency
// rises with the work per kernel (small segments and narrow models run further from the peak).
#include <string>

#include "plait/sim/latency_curve.h"

namespace plait::sim {

struct FlopsEfficiency {
  double peak_flops = 0;           // FLOP/s of the device this profile describes (datasheet)
  double measured_peak_flops = 0;  // datasheet FLOP/s of the device the curves were measured on
  // Seconds against FLOPs of one layer's forward, and of one layer's whole backward (B + W, twice
  // the forward's FLOPs), on the measured device.
  LatencyCurve forward, backward;
  std::string source;  // where the curves come from

  // Seconds of `flops` of one layer's forward (backward) on this device: the measured time scaled
  // by measured peak / peak (the same efficiency at the same work).
  double forward_seconds(double flops) const;
  double backward_seconds(double flops) const;
  // d seconds / d FLOP at that much work (the LM head's rate, no fixed cost of its own).
  double forward_marginal(double flops) const;
  double backward_marginal(double flops) const;
  // The fraction of the peak one layer's forward of `flops` reaches.
  double forward_efficiency(double flops) const { return flops / (peak_flops * forward_seconds(flops)); }
};

// The efficiency of a GPU type Zorse measured (share/profiles/zorse/, `dtype` float16 by
// default), its curves fitted to every measured (model, sequence, micro-batch size) of that type
// with model statistics, the work b * (2 * seq * parameters_per_layer + 2 * hidden * seq^2);
// `measured_peak_flops` is that type's datasheet peak, `peak_flops` the described device's.
// Throws plait::Error when the type has no such samples.
FlopsEfficiency zorse_efficiency(const std::string& gpu, const std::string& dtype, double measured_peak_flops,
                                 double peak_flops);

}  // namespace plait::sim
