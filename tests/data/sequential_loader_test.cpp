#include "plait/data/sequential_loader.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "plait/core/error.h"

namespace plait::data {
namespace {

std::vector<std::uint16_t> iota_tokens(int n) {
  std::vector<std::uint16_t> t(n);
  std::iota(t.begin(), t.end(), 0);
  return t;
}

TEST(SequentialLoader, WalksTheStreamInOverlappingWindowsOfSeqPlusOne) {
  const auto tokens = iota_tokens(41);  // S = (41 - 1) / 8 = 5 windows per epoch
  TokenSpanSource src(tokens);
  SequentialLoader loader(src, 8, 2, MicrobatchShares({1}));
  EXPECT_EQ(loader.samples_per_epoch(), 5);
  std::vector<std::int32_t> x(16), y(16);
  loader.fill(0, 0, x.data(), y.data());  // samples 0 and 1
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(x[i], i);
    EXPECT_EQ(y[i], i + 1);
  }
  loader.fill(2, 0, x.data(), y.data());  // samples 4 and 5 = epoch 1's sample 0
  EXPECT_EQ(x[0], 32);
  EXPECT_EQ(y[7], 40);
  EXPECT_EQ(x[8], 0);
}

TEST(SequentialLoader, SplitsAStepOverHeterogeneousReplicasWithoutOverlap) {
  const auto tokens = iota_tokens(10000);
  TokenSpanSource src(tokens);
  const MicrobatchShares shares({3, 1, 2});  // replica 0 is the fastest
  SequentialLoader loader(src, 16, 2, shares);
  EXPECT_EQ(loader.microbatches_per_step(), 6);
  EXPECT_EQ(shares.first(2), 4);
  EXPECT_EQ(shares.replica_of(3), 1);
  std::set<std::int32_t> firsts;
  std::vector<std::int32_t> x(32), y(32);
  for (int r = 0; r < shares.replicas(); ++r) {
    for (int l = 0; l < shares.count(r); ++l) {
      loader.fill_local(7, r, l, x.data(), y.data());
      std::vector<std::int32_t> xg(32), yg(32);
      loader.fill(7, shares.global_index(r, l), xg.data(), yg.data());
      EXPECT_EQ(x, xg);
      firsts.insert(x[0]);
      firsts.insert(x[16]);
    }
  }
  // 12 distinct consecutive windows: step 7 covers samples 84..95.
  ASSERT_EQ(firsts.size(), 12u);
  EXPECT_EQ(*firsts.begin(), 84 * 16);
  EXPECT_EQ(*firsts.rbegin(), 95 * 16);
}

TEST(SequentialLoader, ResumesFromItsStateEvenWithOtherShares) {
  const auto tokens = iota_tokens(5000);
  TokenSpanSource src(tokens);
  SequentialLoader first(src, 8, 4, MicrobatchShares({2, 2}));
  const nlohmann::json state = first.state(10);
  EXPECT_EQ(state["sample"], 160);
  // The resumed run uses three replicas with 1, 2 and 1 micro-batches: same stream position.
  SequentialLoader resumed(src, 8, 4, MicrobatchShares({1, 2, 1}),
                           SequentialLoader::position_from_state(state, src, 8, "ckpt/manifest.json"));
  std::vector<std::int32_t> a(32), ay(32), b(32), by(32);
  for (int g = 0; g < 4; ++g) {
    first.fill(10, g, a.data(), ay.data());
    resumed.fill(10, g, b.data(), by.data());
    EXPECT_EQ(a, b);
    EXPECT_EQ(ay, by);
  }
  EXPECT_EQ(resumed.position(12), (DataPosition{12, 160 + 2 * 16}));
}

TEST(SequentialLoader, RefusesAStateFromOtherDataOrSeq) {
  const auto tokens = iota_tokens(5000);
  TokenSpanSource src(tokens);
  SequentialLoader loader(src, 8, 4, MicrobatchShares({2}));
  nlohmann::json state = loader.state(3);
  state["seq"] = 16;
  try {
    SequentialLoader::position_from_state(state, src, 8, "m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "m.json: data_position.seq: the checkpoint was taken with seq 16, this run has seq "
                 "8; resuming would read other windows");
  }
  state = loader.state(3);
  state["stream_tokens"] = 4999;
  EXPECT_THROW(SequentialLoader::position_from_state(state, src, 8, "m.json"), InputError);
  state = loader.state(3);
  state["extra"] = 1;
  EXPECT_THROW(SequentialLoader::position_from_state(state, src, 8, "m.json"), InputError);
}

TEST(ValidationSet, IsDueEveryNStepsAndOnTheLastAndAlwaysReadsTheSameBatches) {
  const auto tokens = iota_tokens(3000);
  TokenSpanSource held_out(tokens);
  ValidationSet val(held_out, 8, 2, MicrobatchShares::even(2, 5), 25);
  EXPECT_TRUE(val.due(0, 99));
  EXPECT_FALSE(val.due(24, 99));
  EXPECT_TRUE(val.due(25, 99));
  EXPECT_TRUE(val.due(99, 99));
  EXPECT_EQ(val.microbatches(), 5);
  EXPECT_EQ(val.loader().shares().count(0), 3);
  std::vector<std::int32_t> x(16), y(16);
  val.fill(4, x.data(), y.data());
  EXPECT_EQ(x[0], 8 * 8);  // micro-batch 4 holds samples 8 and 9
}

TEST(MicrobatchShares, RejectsImpossibleSplits) {
  EXPECT_THROW(MicrobatchShares({}), Error);
  EXPECT_THROW(MicrobatchShares({0, 0}), Error);
  EXPECT_THROW(MicrobatchShares({2, -1}), Error);
  EXPECT_THROW(MicrobatchShares::even(4, 3), Error);
  const MicrobatchShares s({0, 2});
  EXPECT_EQ(s.replica_of(0), 1);
  EXPECT_THROW(s.global_index(0, 0), Error);
}

}  // namespace
}  // namespace plait::data
