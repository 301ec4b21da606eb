// Work-aware Seq1F1B cuts (spec/document_partition.h): segments of equal forward FLOPs computed
// from the (query, key) pairs attention visits inside documents.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "plait/core/error.h"
#include "plait/spec/document_partition.h"

namespace plait::spec {
namespace {

const ModelSpec kSmall = gpt2_model(4, 256, 4, 8192, 4096);

// pairs[p] of `rows` rows that are each documents of `length` tokens back to back.
std::vector<std::int64_t> equal_documents(int seq, int length, int rows) {
  std::vector<std::int64_t> pairs(static_cast<std::size_t>(seq));
  for (int p = 0; p < seq; ++p) pairs[p] = std::int64_t{rows} * (p % length + 1);
  return pairs;
}

// The coefficients are segment_forward_flops's terms: a whole causal sequence's work adds up to
// it up to the formula's continuous pair count (s e - s^2/2 against the s(s+1)/2 pairs visited).
TEST(DocumentPartition, CoefficientsAreTheSegmentFlopsTerms) {
  const SegmentWorkCoefficients c = segment_work_coefficients(kSmall);
  const double s = 512;
  EXPECT_DOUBLE_EQ(c.per_token * s + c.per_pair * (s * s / 2), kSmall.segment_forward_flops(0, 512));
}

// One causal document per row: the cut is the flops split's (within a token of the continuous
// solution's rounding), with the first segment longest.
TEST(DocumentPartition, WholeSequencesCutLikeTheFlopsSplit) {
  const int seq = 4096;
  const std::vector<double> work = position_work(kSmall, equal_documents(seq, seq, 2), 2);
  const SequencePartition cut = work_partition(work, 2, 4);
  const SequencePartition flops = flops_partition(kSmall, seq, 4);
  ASSERT_EQ(cut.count(), 4);
  EXPECT_EQ(cut.seq(), seq);
  for (int i = 0; i < 4; ++i) EXPECT_LE(std::abs(cut.lengths[i] - flops.lengths[i]), 2) << "segment " << i;
  EXPECT_GT(cut.lengths[0], cut.lengths[3]);
  EXPECT_LT(cut.flops_imbalance(), 0.002);
}

// Documents of 256 tokens: every 1024 tokens carry the same work, so the equal cut is the even
// one exactly, where the full-causal flops split would give the first segment far more tokens.
TEST(DocumentPartition, ShortDocumentsCutEvenly) {
  const std::vector<double> work = position_work(kSmall, equal_documents(4096, 256, 3), 3);
  const SequencePartition cut = work_partition(work, 3, 4);
  EXPECT_EQ(cut.lengths, (std::vector<std::int64_t>{1024, 1024, 1024, 1024}));
  EXPECT_EQ(cut.starts, (std::vector<std::int64_t>{0, 1024, 2048, 3072}));
  EXPECT_NEAR(cut.flops_imbalance(), 0.0, 1e-12);
  // Per-sample FLOPs: the micro-batch's work over its rows.
  const double whole = std::accumulate(work.begin(), work.end(), 0.0) / 3;
  EXPECT_NEAR(cut.flops[0] * 4, whole, 1e-9 * whole);
}

// A long document first and short ones after: the first segment takes fewer tokens than the
// even cut would give the front... and the cut follows where the work is, not the tokens.
TEST(DocumentPartition, FollowsTheWorkOfALongDocument) {
  const int seq = 2048;
  std::vector<std::int64_t> pairs(seq);
  for (int p = 0; p < seq; ++p) pairs[p] = p < 1536 ? p + 1 : (p - 1536) % 64 + 1;
  const SequencePartition cut = work_partition(position_work(kSmall, pairs, 1), 1, 4);
  const SequencePartition flops = flops_partition(kSmall, seq, 4);
  EXPECT_EQ(cut.seq(), seq);
  EXPECT_LT(cut.flops_imbalance(), 0.01);
  // The short documents at the end carry little work: the last segment is longer than the
  // full-causal split's last.
  EXPECT_GT(cut.lengths[3], flops.lengths[3]);
}

// Lengths are multiples of the rounding multiple, and every segment keeps at least one multiple
// even when nearly all the work sits in one place.
TEST(DocumentPartition, RoundsToTheMultipleAndKeepsEverySegment) {
  std::vector<double> work(64, 1.0);
  work[0] = 1e9;
  const SequencePartition cut = work_partition(work, 1, 4, 8);
  ASSERT_EQ(cut.count(), 4);
  for (std::int64_t length : cut.lengths) {
    EXPECT_EQ(length % 8, 0);
    EXPECT_GE(length, 8);
  }
  EXPECT_EQ(cut.seq(), 64);
  const SequencePartition rounded = work_partition(position_work(kSmall, equal_documents(4096, 4096, 1), 1), 1, 4, 128);
  for (std::int64_t length : rounded.lengths) EXPECT_EQ(length % 128, 0);
}

TEST(DocumentPartition, RefusesMoreSegmentsThanTokens) {
  const std::vector<double> work(6, 1.0);
  EXPECT_THROW(work_partition(work, 1, 7), Error);
  EXPECT_THROW(work_partition(work, 1, 4, 2), Error);
  EXPECT_THROW(work_partition(work, 1, 0), Error);
}

}  // namespace
}  // namespace plait::spec
