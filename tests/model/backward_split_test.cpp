// B (backward_input) followed by W (backward_weight) computes exactly — bitwise — what the fused
// backward computes, whether W runs right after its B or is deferred past other units' B.
#include <gtest/gtest.h>

#include <cstring>

#include "plait/core/memory_tracker.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class BackwardSplit : public FamilyTest {};

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

TEST_P(BackwardSplit, BThenWEqualsFusedBitwiseOnTheWholeModel) {
  const spec::ModelSpec config = tiny();
  const Batch b = random_batch(2, 13, config.vocab, 5);
  const auto segs = segments_from_lengths(13, {3, 6, 4});
  std::vector<std::vector<float>> grads;
  std::vector<double> losses;
  for (Backward mode : {Backward::kFused, Backward::kSplitImmediate, Backward::kSplitDeferred}) {
    MemoryTracker tracker;
    StageModel m(config, StageSpec::whole_model(config), tracker);
    m.init_parameters(11);
    // Two micro-batches accumulate, so W also adds onto non-zero gradients.
    losses.push_back(run_whole_model(m, 0, b, segs, 0.02, mode) +
                     run_whole_model(m, 1, random_batch(2, 13, config.vocab, 6), segs, 0.02, mode));
    grads.emplace_back(m.gradients().begin(), m.gradients().end());
  }
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(losses[2], losses[0]);
  EXPECT_TRUE(bitwise_equal(grads[1], grads[0]));
  EXPECT_TRUE(bitwise_equal(grads[2], grads[0]));
}

TEST_P(BackwardSplit, BThenWEqualsFusedBitwiseOnAMiddleStage) {
  // A stage without embedding or head: B also returns dL/d(input), which must match too.
  const spec::ModelSpec config = tiny();
  const StageSpec spec{0, 2, false, false};
  const int rows = 2, seq = 9;
  const auto segs = segments_from_lengths(seq, {4, 5});
  std::mt19937_64 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> in, grad_out;
  for (const Segment& s : segs) {
    const std::size_t n = static_cast<std::size_t>(rows) * s.length * config.hidden;
    in.emplace_back(n);
    grad_out.emplace_back(n);
    for (auto& v : in.back()) v = dist(rng);
    for (auto& v : grad_out.back()) v = dist(rng);
  }
  std::vector<std::vector<float>> grads, grad_ins;
  for (bool fused : {true, false}) {
    MemoryTracker tracker;
    StageModel m(config, spec, tracker);
    m.init_parameters(11);
    std::vector<float> out(in[0].size() + in[1].size());
    m.forward(0, rows, segs[0], in[0].data(), nullptr, out.data());
    m.forward(0, rows, segs[1], in[1].data(), nullptr, out.data());
    std::vector<float> all_grad_in;
    for (int i = 1; i >= 0; --i) {
      std::vector<float> grad_in(in[i].size());
      if (fused) {
        m.backward(0, segs[i], grad_out[i].data(), grad_in.data());
      } else {
        m.backward_input(0, segs[i], grad_out[i].data(), grad_in.data());
      }
      all_grad_in.insert(all_grad_in.end(), grad_in.begin(), grad_in.end());
    }
    if (!fused) {
      for (int i = 1; i >= 0; --i) m.backward_weight(0, segs[i]);
    }
    grads.emplace_back(m.gradients().begin(), m.gradients().end());
    grad_ins.push_back(all_grad_in);
  }
  EXPECT_TRUE(bitwise_equal(grads[1], grads[0]));
  EXPECT_TRUE(bitwise_equal(grad_ins[1], grad_ins[0]));
}

PLAIT_FOR_EVERY_FAMILY(BackwardSplit);

}  // namespace
}  // namespace plait::model
