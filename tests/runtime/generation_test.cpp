// Generation (runtime/generation.h, model::StageModel::decode): each new token's logits through
// the K/V cache equal the training forward's logits at that position within 1e-5; greedy and
// seeded sampling give the same tokens with the cache as without it; the cache is all a decode
// keeps; the sampler's top-k, top-p and temperature.
#include "plait/runtime/generation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "plait/core/error.h"
#include "plait/core/memory_tracker.h"
#include "plait/model/stage_model.h"
#include "small_models.h"

namespace plait::runtime {
namespace {

spec::ModelSpec small(spec::Family family) { return test::small_model(family, 61, 48, family == spec::Family::gpt2, 40, 300.0); }

class Generation : public ::testing::TestWithParam<spec::Family> {
 protected:
  Generation() : model_(small(GetParam()), model::StageSpec::whole_model(small(GetParam())), tracker_) {
    model_.init_parameters(9);
    test::spread(model_, 17, 12, 0.3f);
  }
  MemoryTracker tracker_;
  model::StageModel model_;
  const std::vector<std::int32_t> prompt_ = {3, 14, 15, 9, 26, 5};
};

TEST_P(Generation, CachedLogitsEqualTheTrainingForwardsWithin1e5) {
  SamplingOptions greedy;
  greedy.temperature = 0;
  const int count = 30;
  const runtime::Generation g = generate(model_, prompt_, count, greedy, true, true);
  ASSERT_EQ(g.logits.size(), static_cast<std::size_t>(count));
  // The training forward (one segment over the whole sequence) of prompt + the tokens drawn:
  // its logits at position p predict token p + 1.
  std::vector<std::int32_t> sequence = prompt_;
  sequence.insert(sequence.end(), g.tokens.begin(), g.tokens.end() - 1);
  const int n = static_cast<int>(sequence.size());
  const int v = model_.config().vocab;
  std::vector<std::int32_t> targets(sequence.size(), 0);
  std::vector<float> logits(static_cast<std::size_t>(n) * v);
  model_.forward_loss(0, 1, {0, 0, n}, nullptr, sequence.data(), targets.data(), 1.0, logits.data());
  model_.discard(0);
  double worst = 0, largest = 0;
  for (int i = 0; i < count; ++i) {
    const std::size_t row = static_cast<std::size_t>(prompt_.size() - 1 + i) * v;
    for (int k = 0; k < v; ++k) {
      worst = std::max(worst, std::fabs(static_cast<double>(g.logits[i][k]) - logits[row + k]));
      largest = std::max(largest, std::fabs(static_cast<double>(logits[row + k])));
    }
  }
  EXPECT_LE(worst, 1e-5) << "largest logit " << largest;
  std::printf("%s: %d tokens, largest |logit| %.3f, largest difference from the training forward %.3g\n",
              spec::family_name(GetParam()).data(), count, largest, worst);
  EXPECT_GT(largest, 1.0);
  // And so does a training forward cut into Seq1F1B segments (the prefix attention the cache
  // generalises): the same logits, to the same bound.
  std::vector<float> segmented(logits.size());
  const int cut[] = {0, 7, 8, 20, n};
  for (int s = 0; s + 1 < 5; ++s) {
    model_.forward_loss(0, 1, {s, cut[s], cut[s + 1] - cut[s]}, nullptr, sequence.data() + cut[s], targets.data(), 1.0,
                        segmented.data() + static_cast<std::size_t>(cut[s]) * v);
  }
  model_.discard(0);
  for (std::size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(segmented[i], logits[i], 1e-5) << i;
}

TEST_P(Generation, TheCacheChangesNoTokenGreedyOrSampled) {
  SamplingOptions greedy;
  greedy.temperature = 0;
  const runtime::Generation a = generate(model_, prompt_, 40, greedy, true);
  const runtime::Generation b = generate(model_, prompt_, 40, greedy, false);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 40u);
  // Not one token repeated forever: the comparison covers varied positions.
  EXPECT_GT(std::set<int>(a.tokens.begin(), a.tokens.end()).size(), 3u);
  SamplingOptions sampled;
  sampled.temperature = 0.8;
  sampled.top_k = 20;
  sampled.top_p = 0.95;
  sampled.seed = 5;
  const runtime::Generation c = generate(model_, prompt_, 40, sampled, true);
  EXPECT_EQ(c.tokens, generate(model_, prompt_, 40, sampled, false).tokens);
  EXPECT_NE(c.tokens, a.tokens);
}

TEST_P(Generation, TheCacheIsAllADecodeKeeps) {
  const spec::ModelSpec& m = model_.config();
  model_.begin_decode(20);
  const std::size_t cache = static_cast<std::size_t>(m.layers) * 20 * 2 * m.kv_dim() * sizeof(float);
  EXPECT_EQ(tracker_.current(MemoryCategory::kKVCache), cache);
  std::vector<float> logits(static_cast<std::size_t>(prompt_.size()) * m.vocab);
  model_.decode({0, 0, static_cast<int>(prompt_.size())}, nullptr, prompt_.data(), nullptr, logits.data());
  EXPECT_EQ(tracker_.current(MemoryCategory::kActivations), 0u);
  EXPECT_EQ(tracker_.current(MemoryCategory::kKVCache), cache);
  EXPECT_EQ(model_.decoded_positions(), 6);
  // Out of order, past the capacity: errors naming the positions.
  EXPECT_THROW(model_.decode({0, 3, 1}, nullptr, prompt_.data(), nullptr, logits.data()), Error);
  EXPECT_THROW(model_.decode({0, 6, 15}, nullptr, prompt_.data(), nullptr, logits.data()), Error);
  model_.end_decode();
  EXPECT_EQ(tracker_.current(MemoryCategory::kKVCache), 0u);
  EXPECT_THROW(generate(model_, prompt_, 43, SamplingOptions{}, true), InputError);  // 6 + 43 > 48
}

INSTANTIATE_TEST_SUITE_P(BothFamilies, Generation, ::testing::Values(spec::Family::gpt2, spec::Family::llama),
                         [](const auto& info) { return std::string(spec::family_name(info.param)); });

TEST(Sampling, GreedyTopKAndTopPPickTheLargest) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  SamplingOptions o;
  o.temperature = 0;
  EXPECT_EQ(sample_token(logits, o, 0), 1);
  o.temperature = 1;
  o.top_k = 1;
  for (std::uint64_t d = 0; d < 50; ++d) EXPECT_EQ(sample_token(logits, o, d), 1);
  o.top_k = 0;
  o.top_p = 1e-6;
  for (std::uint64_t d = 0; d < 50; ++d) EXPECT_EQ(sample_token(logits, o, d), 1);
  o.top_p = 1;
  o.top_k = 2;  // only 1 and 3 are ever drawn
  for (std::uint64_t d = 0; d < 200; ++d) {
    const int t = sample_token(logits, o, d);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  o.top_k = -1;
  EXPECT_THROW(sample_token(logits, o, 0), Error);
}

TEST(Sampling, DrawsFollowTheSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -0.5f};
  for (const double temperature : {1.0, 0.5}) {
    SamplingOptions o;
    o.temperature = temperature;
    o.seed = 77;
    std::vector<double> p(logits.size());
    double sum = 0;
    for (std::size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] / temperature);
    std::vector<int> counts(logits.size(), 0);
    constexpr int kDraws = 20000;
    for (int d = 0; d < kDraws; ++d) ++counts[static_cast<std::size_t>(sample_token(logits, o, static_cast<std::uint64_t>(d)))];
    for (std::size_t i = 0; i < p.size(); ++i) {
      // 5 standard deviations of a binomial count: deterministic draws, so this either always
      // holds or never does.
      const double expected = kDraws * p[i] / sum;
      EXPECT_NEAR(counts[i], expected, 5 * std::sqrt(expected) + 1) << "temperature " << temperature << " token " << i;
    }
  }
  // Nucleus: with top-p 0.7 only the tokens whose cumulative probability first reaches 0.7.
  SamplingOptions o;
  o.top_p = 0.7;  // p = [0.245, 0.090, 0.665, 0.0...]: tokens 2 then 0 (0.665 < 0.7 <= 0.91)
  std::map<int, int> seen;
  for (std::uint64_t d = 0; d < 2000; ++d) ++seen[sample_token(logits, o, d)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen.contains(0) && seen.contains(2));
}

}  // namespace
}  // namespace plait::runtime
