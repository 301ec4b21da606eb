// sim/document_work.h: each micro-batch's units from its own documents, cut as the runtime cuts.
#include "plait/sim/document_work.h"

#include <gtest/gtest.h>

#include <numeric>

#include "plait/core/error.h"
#include "plait/data/balanced_order.h"
#include "plait/data/document_mask.h"
#include "plait/data/packed_sequences.h"
#include "plait/spec/document_partition.h"

namespace plait::sim {
namespace {

// A micro-batch of two rows: one whole document of 8 tokens, and documents of 3 and 5. The
// units hold rows x length tokens and the pairs their positions visit; over the cut they add up
// to every token and pair; a row of one document visits the full causal triangle.
TEST(DocumentWork, UnitsHoldEachSegmentsTokensAndVisitedPairs) {
  const spec::ModelSpec model = spec::gpt2_model(2, 64, 4, 256, 64);
  const std::vector<data::SequenceDocuments> rows = {{{0}, 8, false}, {{0, 3}, 8, false}};
  const std::vector<std::int64_t> pairs = data::attention_pairs(rows, 8);
  const spec::SequencePartition even = spec::even_partition(model, 8, 2);
  const std::vector<UnitWork> units = segment_work(pairs, 2, even);
  ASSERT_EQ(units.size(), 2u);
  EXPECT_DOUBLE_EQ(units[0].tokens, 8);
  EXPECT_DOUBLE_EQ(units[1].tokens, 8);
  // Row 0: 1+2+3+4 | 5+6+7+8; row 1: 1+2+3 + 1 | 2+3+4+5.
  EXPECT_DOUBLE_EQ(units[0].pairs, 10 + 7);
  EXPECT_DOUBLE_EQ(units[1].pairs, 26 + 14);

  const MicrobatchDocuments nominal = microbatch_documents(model, rows, 8, {even, false, 1});
  EXPECT_EQ(nominal.cut.lengths, even.lengths);
  EXPECT_DOUBLE_EQ(nominal.attention, 64 + 9 + 25);
  const spec::SequencePartition flops = spec::flops_partition(model, 8, 2);
  const MicrobatchDocuments cut = microbatch_documents(model, rows, 8, {flops, true, 1});
  EXPECT_EQ(cut.cut.lengths, spec::document_partition(model, pairs, 2, 2).lengths);  // the runtime's cut
  double tokens = 0, visited = 0;
  for (const UnitWork& u : cut.units) {
    tokens += u.tokens;
    visited += u.pairs;
  }
  EXPECT_DOUBLE_EQ(tokens, 16);
  EXPECT_DOUBLE_EQ(visited, static_cast<double>(std::accumulate(pairs.begin(), pairs.end(), std::int64_t{0})));
}

// A step of packed documents read as a run reads them: the longest segment of each position over
// the micro-batches, max/mean of their attention work, and the equal-work step's means.
TEST(DocumentWork, StepsOfADistributionAreReadAsTheLoaderReadsThem) {
  const spec::ModelSpec model = spec::gpt2_model(2, 64, 4, 256, 2048);
  const data::DocumentDistribution d = data::parse_document_distribution("lognormal:300:1.5", "test");
  const DocumentStream plain(d, 2048, 2, 4, 3, 0), again(d, 2048, 2, 4, 3, 0);
  EXPECT_EQ(plain.packed().layout_crc32c(), again.packed().layout_crc32c());  // a pure function of the draw
  const spec::SequencePartition flops = spec::flops_partition(model, 2048, 4);
  const StepDocuments s = step_documents(model, plain.loader(), 1, {flops, true, 1});
  ASSERT_EQ(s.units.size(), 4u);
  ASSERT_EQ(s.longest.size(), 4u);
  for (int mb = 0; mb < 4; ++mb) {
    const MicrobatchDocuments m = microbatch_documents(model, plain.loader().documents(1, mb), 2048, {flops, true, 1});
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_LE(m.cut.lengths[i], s.longest[i]);
      EXPECT_DOUBLE_EQ(m.units[i].pairs, s.units[static_cast<std::size_t>(mb)][i].pairs);
    }
  }
  EXPECT_GE(s.max_over_mean, 1.0);
  const MicrobatchWork equal = equal_work(s.units);
  ASSERT_EQ(equal.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    double pairs = 0;
    for (const auto& mb : s.units) pairs += mb[i].pairs / 4;
    EXPECT_DOUBLE_EQ(equal[2][i].pairs, pairs);
  }
}

// Data-parallel replicas take consecutive equal shares of the step's micro-batches, as
// schedule::replicate hands them out: each replica's pipeline is timed on its own units, its
// attention is the sum of its micro-batches', and the step is the slowest replica's.
TEST(DocumentWork, ReplicasTimeTheirOwnMicrobatchesAndTheStepIsTheSlowest) {
  StepDocuments step;
  for (int mb = 0; mb < 6; ++mb) {
    step.units.push_back({{1, static_cast<double>(10 * mb)}, {1, 1}});
    step.attention.push_back(static_cast<double>(mb + 1));
  }
  std::vector<std::size_t> sizes;
  // A pipeline's time here: the pairs of its units (any function of the units would do).
  const auto pairs = [&](const MicrobatchWork& units) {
    sizes.push_back(units.size());
    double t = 0;
    for (const auto& mb : units) {
      for (const UnitWork& u : mb) t += u.pairs;
    }
    return t;
  };
  const ReplicaSteps r = replica_steps(step, 3, pairs);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 2, 2}));
  // Replica 0: micro-batches 0, 1; replica 1: 2, 3; replica 2: 4, 5.
  EXPECT_EQ(r.seconds, (std::vector<double>{0 + 10 + 2, 20 + 30 + 2, 40 + 50 + 2}));
  EXPECT_EQ(r.attention, (std::vector<double>{1 + 2, 3 + 4, 5 + 6}));
  EXPECT_EQ(replica_attention(step, 3), r.attention);
  EXPECT_DOUBLE_EQ(r.slowest, 92);
  // One replica: the whole step.
  EXPECT_DOUBLE_EQ(replica_steps(step, 1, pairs).slowest, 0 + 10 + 20 + 30 + 40 + 50 + 6);
  // The runtime gives every replica the same count.
  EXPECT_THROW(replica_steps(step, 4, pairs), Error);
}

// The balanced order balances the micro-batches of every replica of a step at once (the loader
// reads all dp x m), so the replicas' spread of sum(doc^2) falls with it: documents of a long tail
// (lognormal median 200, sigma 1.8), 2 replicas x 1 micro-batch x 4 sequences of 4096, 32 steps
// (the configuration of docs/data.md "Balancing" measured under pp 2 x dp 2).
TEST(DocumentWork, BalancingEvensTheReplicas) {
  const spec::ModelSpec model = spec::gpt2_model(2, 64, 4, 256, 4096);
  const data::DocumentDistribution d = data::parse_document_distribution("lognormal:200:1.8", "test");
  const DocumentStream plain(d, 4096, 4, 2, 32, 0), balanced(d, 4096, 4, 2, 32, 1);
  const spec::SequencePartition flops = spec::flops_partition(model, 4096, 4);
  double plain_spread = 0, balanced_spread = 0;
  for (int s = 0; s < 32; ++s) {
    const std::vector<double> p = replica_attention(step_documents(model, plain.loader(), s, {flops, true, 1}), 2);
    const std::vector<double> b = replica_attention(step_documents(model, balanced.loader(), s, {flops, true, 1}), 2);
    // A window of one step reorders the step's own sequences: the same total.
    EXPECT_NEAR(p[0] + p[1], b[0] + b[1], 1e-6 * (p[0] + p[1]));
    plain_spread += data::max_over_mean(p, 1) / 32;
    balanced_spread += data::max_over_mean(b, 1) / 32;
  }
  EXPECT_GT(plain_spread, 1.1);
  EXPECT_LT(balanced_spread - 1, (plain_spread - 1) / 2);
}

}  // namespace
}  // namespace plait::sim
