// Activation recomputation changes memory, not numbers: with some or all layers of a stage
// recomputed, the losses, the parameter gradients and dL/d(input) are bitwise those without,
// for the fused and the split backward (W right after B, or deferred past other units), with a
// sequence whole or in segments of uneven lengths, and with two micro-batches in flight.
#include <gtest/gtest.h>

#include "plait/core/memory_tracker.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class Recompute : public FamilyTest {};

struct Result {
  double loss = 0;
  std::vector<float> gradients;
};

// Two micro-batches through the whole model: both forwarded (segments in order), then both
// backwarded, so each one's K/V and kept inputs wait while the other runs.
Result whole_model(const spec::ModelSpec& config, int recompute, const std::vector<Segment>& segs,
                Backward mode) {
  MemoryTracker tracker;
  StageSpec spec = StageSpec::whole_model(config);
  spec.recompute_layers = recompute;
  StageModel m(config, spec, tracker);
  m.init_parameters(11);
  const int rows = 2, seq = segs.back().end();
  const Batch batches[2] = {random_batch(rows, seq, config.vocab, 5),
                            random_batch(rows, seq, config.vocab, 6)};
  Result r;
  for (int mb = 0; mb < 2; ++mb) {
    for (const Segment& s : segs) {
      const auto tok = columns(batches[mb].tokens, rows, seq, s);
      const auto tgt = columns(batches[mb].targets, rows, seq, s);
      r.loss += m.forward_loss(mb, rows, s, nullptr, tok.data(), tgt.data(), 0.02);
    }
  }
  for (int mb = 0; mb < 2; ++mb) {
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      if (mode == Backward::kFused) {
        m.backward(mb, *it, nullptr, nullptr);
      } else {
        m.backward_input(mb, *it, nullptr, nullptr);
        if (mode == Backward::kSplitImmediate) m.backward_weight(mb, *it);
      }
    }
  }
  if (mode == Backward::kSplitDeferred) {
    for (int mb = 0; mb < 2; ++mb) {
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) m.backward_weight(mb, *it);
    }
  }
  EXPECT_EQ(m.microbatches_in_flight(), 0u);
  EXPECT_EQ(tracker.current(MemoryCategory::kActivations), 0u);
  EXPECT_EQ(tracker.current(MemoryCategory::kKVCache), 0u);
  r.gradients.assign(m.gradients().begin(), m.gradients().end());
  return r;
}

TEST_P(Recompute, WholeModelGradientsAreBitwiseTheSame) {
  const spec::ModelSpec config = tiny();
  for (const std::vector<int>& lengths : std::vector<std::vector<int>>{{13}, {3, 6, 4}}) {
    const auto segs = segments_from_lengths(13, lengths);
    for (Backward mode : {Backward::kFused, Backward::kSplitImmediate, Backward::kSplitDeferred}) {
      const Result reference = whole_model(config, 0, segs, mode);
      for (int recompute = 1; recompute <= config.layers; ++recompute) {
        SCOPED_TRACE("segments " + std::to_string(lengths.size()) + ", mode " +
                     std::to_string(static_cast<int>(mode)) + ", recompute " + std::to_string(recompute));
        const Result r = whole_model(config, recompute, segs, mode);
        EXPECT_EQ(r.loss, reference.loss);
        EXPECT_TRUE(bitwise_equal(r.gradients, reference.gradients));
      }
    }
  }
}

TEST_P(Recompute, MiddleStageInputGradientsAreBitwiseTheSame) {
  // No embedding or head: B returns dL/d(input), which must match too.
  const spec::ModelSpec config = tiny();
  const auto segs = segments_from_lengths(9, {4, 5});
  for (bool fused : {true, false}) {
    const MiddleStageRun plain = run_middle_stage(config, {0, 2, false, false}, 2, segs, fused);
    for (int recompute = 1; recompute <= 2; ++recompute) {
      const MiddleStageRun r = run_middle_stage(config, {0, 2, false, false, recompute}, 2, segs, fused);
      EXPECT_TRUE(bitwise_equal(r.gradients, plain.gradients)) << "fused " << fused << " recompute " << recompute;
      EXPECT_TRUE(bitwise_equal(r.grad_in, plain.grad_in)) << "fused " << fused << " recompute " << recompute;
    }
  }
}

TEST_P(Recompute, AStageRefusesMoreLayersThanItHolds) {
  const spec::ModelSpec config = tiny();
  MemoryTracker tracker;
  EXPECT_THROW(StageModel(config, {0, 1, true, false, 2}, tracker), Error);
  EXPECT_THROW(StageModel(config, {0, 1, true, false, -1}, tracker), Error);
}

PLAIT_FOR_EVERY_FAMILY(Recompute);

}  // namespace
}  // namespace plait::model
