// data/document_mask.h: a packed micro-batch's rows as the engine reads them -- each position's
// document start (the padding one more document), nothing for rows that are one whole document
// each -- and the targets its loss counts.
#include "plait/data/document_mask.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"

namespace plait::data {
namespace {

TEST(DocumentMask, EachPositionHoldsItsDocumentsStartAndThePaddingIsADocument) {
  const std::vector<SequenceDocuments> rows = {{{0, 3, 4}, 6, false}, {{0}, 8, true}};
  const std::vector<std::int32_t> want = {0, 0, 0, 3, 4, 4, 6, 6,   // documents [0,3) [3,4) [4,6), padding
                                          0, 0, 0, 0, 0, 0, 0, 0};  // a continuation filling the row
  EXPECT_EQ(document_mask(rows, 8), want);
}

TEST(DocumentMask, RowsOfOneWholeDocumentNeedNoMask) {
  const std::vector<SequenceDocuments> rows = {{{0}, 8, false}, {{0}, 8, true}};
  EXPECT_TRUE(document_mask(rows, 8).empty());
}

TEST(DocumentMask, RefusesARowThatDoesNotStartADocumentAtZero) {
  EXPECT_THROW(document_mask({{{1, 3}, 8, false}}, 8), Error);
  EXPECT_THROW(document_mask({{{0}, 9, false}}, 8), Error);
}

// The keys each position attends to, summed over rows: what a segment's attention work is made of.
TEST(AttentionPairs, CountTheKeysInsideEachPositionsDocument) {
  const std::vector<SequenceDocuments> rows = {{{0, 3, 4}, 6, false}, {{0}, 8, true}};
  // Row 0: documents [0,3) [3,4) [4,6) and padding [6,8): 1 2 3 1 1 2 1 2; row 1: 1..8.
  const std::vector<std::int64_t> want = {2, 4, 6, 5, 6, 8, 8, 10};
  EXPECT_EQ(attention_pairs(rows, 8), want);
  // Whole rows: the causal triangle.
  EXPECT_EQ(attention_pairs({{{0}, 4, false}}, 4), (std::vector<std::int64_t>{1, 2, 3, 4}));
}

class TwoRowSource : public BatchSource {
 public:
  void fill(std::int64_t, int, std::int32_t*, std::int32_t*) const override {}
  int seq() const override { return 8; }
  int microbatch_size() const override { return 2; }
  int microbatches_per_step() const override { return 3; }
  std::vector<SequenceDocuments> documents(std::int64_t step, int microbatch) const override {
    return {{{0}, 8 - microbatch, false}, {{0, 2}, 5 + static_cast<int>(step), false}};
  }
};

TEST(CountedTargets, AreTheDocumentTokensOfEveryRowOfTheStepsMicrobatches) {
  const TwoRowSource source;
  // Step 0: rows of 8, 7, 6 tokens and three of 5.
  EXPECT_EQ(counted_targets(source, 0, 3), 8 + 7 + 6 + 3 * 5);
  EXPECT_EQ(counted_targets(source, 1, 2), 8 + 7 + 2 * 6);
}

}  // namespace
}  // namespace plait::data
