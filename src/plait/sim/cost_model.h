#pragma once
// What one action and one message cost. The simulator asks only this interface, so the runtime
// can later feed measured per-layer timings of its engine, and a heterogeneous cluster can give
// every rank its own speed and every pair of ranks its own link.
#include <cstdint>

#include "plait/schedule/action.h"

namespace plait::sim {

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Seconds `rank` spends on `kind` of (microbatch, segment) on virtual stage `vstage`.
  virtual double compute_seconds(int rank, schedule::ActionKind kind, std::int32_t microbatch,
                                 std::int32_t segment, std::int32_t vstage) const = 0;
  // Seconds to move `bytes` from src_rank to dst_rank.
  virtual double transfer_seconds(int src_rank, int dst_rank, std::int64_t bytes) const = 0;
};

// Every unit costs the same: F, B and W each their own constant, BW = B + W, messages free.
// The textbook setting of ../shared/reference/schedules.md.
class UniformCostModel : public CostModel {
 public:
  UniformCostModel(double forward, double backward, double weight)
      : forward_(forward), backward_(backward), weight_(weight) {}
  double compute_seconds(int, schedule::ActionKind kind, std::int32_t, std::int32_t,
                         std::int32_t) const override {
    switch (kind) {
      case schedule::ActionKind::F: return forward_;
      case schedule::ActionKind::B: return backward_;
      case schedule::ActionKind::W: return weight_;
      case schedule::ActionKind::BW: return backward_ + weight_;
    }
    return 0.0;
  }
  double transfer_seconds(int, int, std::int64_t) const override { return 0.0; }

 private:
  double forward_, backward_, weight_;
};

}  // namespace plait::sim
