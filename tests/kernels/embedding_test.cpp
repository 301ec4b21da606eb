#include "plait/kernels/embedding.h"

#include <gtest/gtest.h>

#include "finite_difference.h"
#include "plait/core/error.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

TEST(Embedding, BackwardMatchesFiniteDifferencesWithRepeatedTokensAndOffset) {
  const int batch = 2, s = 3, c = 5, vocab = 4, pos0 = 2, max_seq = 6;
  const std::vector<std::int32_t> tokens = {1, 3, 1, 0, 1, 1};  // repeats collide in dwte
  auto wte = random_vector(vocab * c, 1), wpe = random_vector(max_seq * c, 2),
       probe = random_vector(batch * s * c, 3);
  std::vector<double> out(batch * s * c);
  auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), batch, s, c, pos0, vocab);
    return dot(probe, out);
  };
  loss();
  EXPECT_DOUBLE_EQ(out[c + 2], wte[3 * c + 2] + wpe[(pos0 + 1) * c + 2]);
  std::vector<double> dwte(vocab * c, 0.0), dwpe(max_seq * c, 0.0);
  embedding_backward(dwte.data(), dwpe.data(), probe.data(), tokens.data(), batch, s, c, pos0);
  EXPECT_LT(scaled_max_error(dwte, numeric_gradient(loss, wte)), kGradientTolerance);
  EXPECT_LT(scaled_max_error(dwpe, numeric_gradient(loss, wpe)), kGradientTolerance);
}

TEST(Embedding, WithoutPositionsIsTheTokenEmbeddingOnly) {
  // LLaMA: no wpe (null in both directions, never read); a segment at pos0 > 0 embeds its tokens
  // exactly as anywhere else.
  const int batch = 2, s = 3, c = 5, vocab = 4, pos0 = 2;
  const std::vector<std::int32_t> tokens = {1, 3, 1, 0, 1, 1};
  auto wte = random_vector(vocab * c, 1), probe = random_vector(batch * s * c, 3);
  std::vector<double> out(batch * s * c);
  auto loss = [&] {
    embedding_forward<double>(out.data(), tokens.data(), wte.data(), nullptr, batch, s, c, pos0,
                              vocab);
    return dot(probe, out);
  };
  loss();
  for (int i = 0; i < batch * s; ++i) {
    for (int j = 0; j < c; ++j) EXPECT_EQ(out[i * c + j], wte[tokens[i] * c + j]);
  }
  std::vector<double> dwte(vocab * c, 0.25);  // accumulates
  embedding_backward<double>(dwte.data(), nullptr, probe.data(), tokens.data(), batch, s, c, pos0);
  for (auto& g : dwte) g -= 0.25;
  EXPECT_LT(scaled_max_error(dwte, numeric_gradient(loss, wte)), kGradientTolerance);
}

TEST(Embedding, RejectsTokensOutsideTheVocabulary) {
  std::vector<float> out(4), wte(8), wpe(8);
  const std::vector<std::int32_t> tokens = {0, 4};
  EXPECT_THROW(embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), 1, 2, 2, 0, 4),
               Error);
}

}  // namespace
}  // namespace plait::kernels
