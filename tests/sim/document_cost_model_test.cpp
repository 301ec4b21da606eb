// sim/document_cost_model.h: each unit's time is the nominal unit's scaled by its FLOPs ratio.
#include "plait/sim/document_cost_model.h"

#include <gtest/gtest.h>

#include "plait/spec/document_partition.h"

namespace plait::sim {
namespace {

using schedule::ActionKind;

TEST(DocumentCostModel, ScalesEachKindByItsFlopsRatio) {
  const spec::ModelSpec model = spec::gpt2_model(2, 64, 4, 256, 64);
  const spec::SequencePartition partition = spec::even_partition(model, 64, 2);
  const UniformCostModel base(1.0, 2.0, 1.0);
  const std::vector<UnitWork> nominal = nominal_work(partition, 2);
  // Micro-batch 0: the nominal units; 1: the same tokens, half the pairs; 2: twice everything.
  MicrobatchWork work = {nominal, nominal, nominal};
  for (UnitWork& u : work[1]) u.pairs /= 2;
  for (UnitWork& u : work[2]) u = {2 * u.tokens, 2 * u.pairs};
  const DocumentCostModel cost(base, model, partition, 2, work);
  const spec::SegmentWorkCoefficients c = spec::segment_work_coefficients(model);
  for (ActionKind kind : {ActionKind::F, ActionKind::B, ActionKind::W, ActionKind::BW}) {
    EXPECT_DOUBLE_EQ(cost.scale(kind, 0, 1), 1.0);
    EXPECT_DOUBLE_EQ(cost.scale(kind, 2, 1), 2.0);
  }
  const UnitWork& n = nominal[1];
  EXPECT_DOUBLE_EQ(cost.scale(ActionKind::F, 1, 1),
                   (c.per_token * n.tokens + c.per_pair * n.pairs / 2) / (c.per_token * n.tokens + c.per_pair * n.pairs));
  EXPECT_DOUBLE_EQ(cost.scale(ActionKind::W, 1, 1), 1.0);  // W has no attention
  EXPECT_DOUBLE_EQ(cost.compute_seconds(0, ActionKind::B, 2, 0, 0), 4.0);
  EXPECT_LT(cost.scale(ActionKind::B, 1, 1), cost.scale(ActionKind::F, 1, 1));  // B holds attention twice
}

}  // namespace
}  // namespace plait::sim
