// B (backward_input) followed by W (backward_weight) computes exactly — bitwise — what the fused
// backward computes, whether W runs right after its B or is deferred past other units' B.
#include <gtest/gtest.h>

#include "plait/core/memory_tracker.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class BackwardSplit : public FamilyTest {};

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
  const auto segs = segments_from_lengths(9, {4, 5});
  const MiddleStageRun fused = run_middle_stage(config, {0, 2, false, false}, 2, segs, true);
  const MiddleStageRun split = run_middle_stage(config, {0, 2, false, false}, 2, segs, false);
  EXPECT_TRUE(bitwise_equal(split.gradients, fused.gradients));
  EXPECT_TRUE(bitwise_equal(split.grad_in, fused.grad_in));
}

PLAIT_FOR_EVERY_FAMILY(BackwardSplit);

}  // namespace
}  // namespace plait::model
