// The recompute value resolves to one count per virtual stage and refuses counts beyond a
// stage's layers, naming the stage.
#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/spec/recompute.h"

namespace plait::spec {
namespace {

TEST(Recompute, ResolvesEveryFormPerVirtualStage) {
  const std::vector<int> layers = {3, 2, 0};
  EXPECT_EQ(Recompute{}.resolve(layers), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(Recompute::full().resolve(layers), layers);
  EXPECT_EQ(Recompute::stages({1, 2, 0}).resolve(layers), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(Recompute::layers_each(0).resolve(layers), (std::vector<int>{0, 0, 0}));
  EXPECT_FALSE(Recompute::layers_each(0).any());
  EXPECT_FALSE(Recompute::stages({0, 0}).any());
  EXPECT_TRUE(Recompute::stages({0, 1}).any());
  EXPECT_EQ(Recompute::stages({1, 0, 2}).describe(), "[1, 0, 2] layers per stage");
}

TEST(Recompute, RefusesMoreLayersThanAStageHolds) {
  try {
    Recompute::layers_each(2).resolve({3, 2, 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "virtual stage 2 has 1 layer, cannot recompute 2");
  }
  EXPECT_THROW(Recompute::stages({1, 1}).resolve({3, 2, 1}), Error);
  EXPECT_THROW(Recompute::stages({1, -1, 0}).resolve({3, 2, 1}), Error);
}

}  // namespace
}  // namespace plait::spec
