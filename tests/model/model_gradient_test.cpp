// The whole model's gradient, tensor by tensor, against central differences of the loss along
// two directions per tensor (its own gradient and a random one). fp32 forward passes and the
// curvature over h limit this to ~1e-3 of the tensor's gradient norm (measured: worst 1.2e-3),
// enough to catch any wrongly wired term (an O(1) error); the kernels themselves are checked
// to 1e-7 in double (tests/kernels).
#include <gtest/gtest.h>

#include <cmath>

#include "plait/core/memory_tracker.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class ModelGradient : public FamilyTest {};

TEST_P(ModelGradient, EveryTensorMatchesDirectionalFiniteDifferences) {
  spec::ModelSpec config = tiny();
  config.tie_embeddings = true;
  const Batch b = random_batch(2, 9, config.vocab, 4);
  const double scale = 1.0 / (b.rows * b.seq);
  const auto segs = segments_from_lengths(9, {5, 4});
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  m.init_parameters(3);
  // Twice GPT-2's init so every path (attention, MLP) carries a gradient well above the fp32
  // noise of the loss, without so much curvature that h = 1e-2 is too coarse.
  for (float& p : m.parameters()) p *= 2.0f;
  run_whole_model(m, 0, b, segs, scale, Backward::kFused);
  const std::vector<float> grad(m.gradients().begin(), m.gradients().end());

  auto loss_at = [&](const NamedTensor& t, const std::vector<float>& dir, double h) {
    auto p = m.parameter(t.name);
    std::vector<float> saved(p.begin(), p.end());
    for (std::size_t i = 0; i < t.numel; ++i) p[i] = static_cast<float>(saved[i] + h * dir[i]);
    m.zero_gradients();
    const double loss = run_whole_model(m, 0, b, segs, scale, Backward::kFused);
    std::copy(saved.begin(), saved.end(), p.begin());
    return loss;
  };
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal;
  for (const NamedTensor& t : m.tensors()) {
    const auto g = std::span<const float>(grad).subspan(t.offset, t.numel);
    double gnorm = 0;
    for (float v : g) gnorm += double(v) * v;
    gnorm = std::sqrt(gnorm);
    ASSERT_GT(gnorm, 0.0) << t.name;
    std::vector<float> along(t.numel), random(t.numel);
    double rnorm = 0;
    for (std::size_t i = 0; i < t.numel; ++i) {
      along[i] = static_cast<float>(g[i] / gnorm);
      random[i] = static_cast<float>(normal(rng));
      rnorm += double(random[i]) * random[i];
    }
    double analytic_random = 0;
    for (std::size_t i = 0; i < t.numel; ++i) {
      random[i] = static_cast<float>(random[i] / std::sqrt(rnorm));
      analytic_random += double(random[i]) * g[i];
    }
    const double h = 1e-2;
    const double fd_along = (loss_at(t, along, h) - loss_at(t, along, -h)) / (2 * h);
    const double fd_random = (loss_at(t, random, h) - loss_at(t, random, -h)) / (2 * h);
    EXPECT_NEAR(fd_along, gnorm, 5e-3 * gnorm) << t.name;
    EXPECT_NEAR(fd_random, analytic_random, 5e-3 * gnorm) << t.name;
  }
}

PLAIT_FOR_EVERY_FAMILY(ModelGradient);

}  // namespace
}  // namespace plait::model
