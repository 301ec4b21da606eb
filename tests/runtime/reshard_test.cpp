// The pieces of a boundary message between stages of different tensor-parallel degrees
// (runtime/reshard.h): every element of the segment goes from the sender that holds it to the
// receiver that needs it exactly once, pieces of 1/max(t, t') when one degree divides the other,
// one whole-slice piece to the same TP rank when the degrees are equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "plait/core/error.h"
#include "plait/runtime/reshard.h"

namespace plait::runtime {
namespace {

// Moves a tensor of `elements` from blocks of degree t to blocks of degree u through the pieces
// both sides compute, and checks that each receiver's block is the tensor's and that the two
// sides agree on every piece.
void expect_moves_exactly(std::int64_t elements, int t, int u) {
  std::vector<float> whole(static_cast<std::size_t>(elements));
  for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
  const std::int64_t block = elements / t, peer_block = elements / u;
  std::vector<std::vector<float>> received(static_cast<std::size_t>(u),
                                           std::vector<float>(static_cast<std::size_t>(peer_block), -1.0f));
  for (int i = 0; i < t; ++i) {
    for (const ReshardPiece& p : reshard_pieces(elements, t, i, u)) {
      EXPECT_EQ(p.count, elements / std::max(t, u)) << t << " -> " << u;
      // The receiver's view of the same piece.
      bool matched = false;
      for (const ReshardPiece& q : reshard_pieces(elements, u, p.peer, t)) {
        if (q.peer == i) {
          matched = true;
          EXPECT_EQ(q.offset, p.peer_offset);
          EXPECT_EQ(q.peer_offset, p.offset);
          EXPECT_EQ(q.count, p.count);
        }
      }
      EXPECT_TRUE(matched) << t << " -> " << u << ": sender " << i << ", receiver " << p.peer;
      for (std::int64_t k = 0; k < p.count; ++k) {
        float& slot = received[static_cast<std::size_t>(p.peer)][static_cast<std::size_t>(p.peer_offset + k)];
        EXPECT_EQ(slot, -1.0f) << "an element received twice";
        slot = whole[static_cast<std::size_t>(i * block + p.offset + k)];
      }
    }
  }
  for (int j = 0; j < u; ++j) {
    for (std::int64_t k = 0; k < peer_block; ++k) {
      ASSERT_EQ(received[static_cast<std::size_t>(j)][static_cast<std::size_t>(k)],
                whole[static_cast<std::size_t>(j * peer_block + k)])
          << t << " -> " << u << ": receiver " << j << ", element " << k;
    }
  }
}

TEST(Reshard, EveryElementGoesOnceFromItsHolderToItsReader) {
  for (int t : {1, 2, 4, 8}) {
    for (int u : {1, 2, 4, 8}) expect_moves_exactly(8 * 6 * 16, t, u);
  }
}

TEST(Reshard, EqualDegreesSendTheWholeSliceToTheSameRank) {
  const std::vector<ReshardPiece> pieces = reshard_pieces(64, 4, 3, 4);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].peer, 3);
  EXPECT_EQ(pieces[0].offset, 0);
  EXPECT_EQ(pieces[0].peer_offset, 0);
  EXPECT_EQ(pieces[0].count, 16);
}

TEST(Reshard, TwoToOneAndOneToTwo) {
  // Degree 2 -> 1: each sender's whole slice into its half of the receiver's buffer.
  std::vector<ReshardPiece> p = reshard_pieces(32, 2, 1, 1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].peer, 0);
  EXPECT_EQ(p[0].peer_offset, 16);
  // Degree 1 -> 2: two halves, one to each receiver.
  p = reshard_pieces(32, 1, 0, 2);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].peer, 1);
  EXPECT_EQ(p[1].offset, 16);
  EXPECT_EQ(p[1].peer_offset, 0);
}

TEST(Reshard, RefusesCutsThatDoNotDivide) {
  EXPECT_THROW(reshard_pieces(30, 4, 0, 2), Error);
  EXPECT_THROW(reshard_pieces(32, 2, 2, 1), Error);
}

}  // namespace
}  // namespace plait::runtime
