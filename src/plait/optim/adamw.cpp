#include "plait/optim/adamw.h"

#include <string>

#include "plait/core/error.h"

namespace plait::optim {

std::vector<ParamRange> param_ranges(const std::vector<model::NamedTensor>& tensors) {
  std::vector<ParamRange> ranges;
  for (const model::NamedTensor& t : tensors) {
    if (!ranges.empty() && ranges.back().weight_decay == t.weight_decay) {
      ranges.back().count = t.offset + t.numel - ranges.back().offset;
    } else {
      ranges.push_back({t.offset, t.numel, t.weight_decay});
    }
  }
  return ranges;
}

AdamW::AdamW(std::span<float> parameters, std::vector<ParamRange> ranges,
             const AdamWConfig& config, MemoryTracker& tracker, kernels::Backend& backend)
    : parameters_(parameters),
      ranges_(std::move(ranges)),
      config_(config),
      backend_(backend),
      m_(tracker, MemoryCategory::kOptimizerState, parameters.size(), backend),
      v_(tracker, MemoryCategory::kOptimizerState, parameters.size(), backend) {
  for (const ParamRange& r : ranges_) {
    if (r.offset + r.count > parameters.size()) {
      throw Error("AdamW: parameter range [" + std::to_string(r.offset) + ", " +
                  std::to_string(r.offset + r.count) + ") exceeds the " +
                  std::to_string(parameters.size()) + " parameters");
    }
  }
}

void AdamW::step(std::span<const float> gradients, double lr, double grad_scale) {
  if (gradients.size() != parameters_.size()) {
    throw Error("AdamW: " + std::to_string(gradients.size()) + " gradients for " +
                std::to_string(parameters_.size()) + " parameters");
  }
  ++steps_;
  for (const ParamRange& r : ranges_) {
    const kernels::AdamWHyper hyper{static_cast<float>(lr),
                                    static_cast<float>(config_.beta1),
                                    static_cast<float>(config_.beta2),
                                    static_cast<float>(config_.eps),
                                    r.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f,
                                    steps_,
                                    static_cast<float>(grad_scale)};
    backend_.adamw_update(parameters_.data() + r.offset, gradients.data() + r.offset,
                          m_.data() + r.offset, v_.data() + r.offset, r.count, hyper);
  }
}

}  // namespace plait::optim
