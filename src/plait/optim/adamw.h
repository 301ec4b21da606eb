#pragma once
// AdamW over one contiguous parameter span (a stage's parameters() or a shard of it), with the
// two moments in the optimizer_state memory category and laid out exactly like the parameters
// (so checkpoints can name them by tensor). Decoupled weight decay (Loshchilov & Hutter, ICLR
// 2019) applies only to the ranges marked for it; the update itself is the backend's
// adamw_update (kernels/backend.h), run where the parameters and moments live.
#include <cstddef>
#include <span>
#include <vector>

#include "plait/core/buffer.h"
#include "plait/core/memory_tracker.h"
#include "plait/kernels/cpu_backend.h"
#include "plait/model/parameter_layout.h"

namespace plait::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// [offset, offset + count) of the span, decayed or not.
struct ParamRange {
  std::size_t offset = 0;
  std::size_t count = 0;
  bool weight_decay = false;
};

// The ranges of a stage's tensors (matrices and embeddings decay; biases and LayerNorm gains do
// not, as in GPT-2/nanoGPT), neighbours with the same flag merged (the zero padding between
// tensors is left as it is by either kind of update).
std::vector<ParamRange> param_ranges(const std::vector<model::NamedTensor>& tensors);

class AdamW {
 public:
  // parameters and the moments (charged to tracker) are the backend's memory.
  AdamW(std::span<float> parameters, std::vector<ParamRange> ranges, const AdamWConfig& config,
        MemoryTracker& tracker, kernels::Backend& backend = kernels::cpu_backend());

  // One update with learning rate lr; every gradient is multiplied by grad_scale first (the
  // clipping factor, so clipping costs no extra pass over the gradients).
  void step(std::span<const float> gradients, double lr, double grad_scale = 1.0);

  int steps_taken() const { return steps_; }
  void set_steps_taken(int steps) { steps_ = steps; }  // when restoring a checkpoint
  const AdamWConfig& config() const { return config_; }
  std::span<float> first_moment() { return m_.span(); }
  std::span<float> second_moment() { return v_.span(); }

 private:
  std::span<float> parameters_;
  std::vector<ParamRange> ranges_;
  AdamWConfig config_;
  kernels::Backend& backend_;
  FloatBuffer m_;
  FloatBuffer v_;
  int steps_ = 0;
};

}  // namespace plait::optim
