// The kernels a tensor-parallel rank runs (model/tensor_parallel.h), each against the whole
// single-process kernel, with the group's collectives done by hand here (a sum or a maximum
// over the ranks' parts, in rank order):
//   - the fp32-result bf16 GEMMs (a row-parallel output's, a column-parallel input gradient's
//     partial products): against the fp64 reference within the fp32 accumulation bound
//     (bf16_gemm_test_support.h), on both paths;
//   - add_bias_residual: the bias and residual added to an fp32 sum in that order, one rounding;
//   - the vocabulary-parallel embedding: the ranks' fp32 parts summed and rounded are BITWISE
//     the whole lookup (one table value plus at most one position value per element); each
//     rank's rows of the table gradient and the whole position-table gradient are bitwise the
//     single kernel's;
//   - the vocabulary-parallel cross-entropy, vocabulary padded to a multiple of 128 t with
//     garbage in the padding columns: losses and gradients within 1e-6 of the whole fp32 kernel
//     (only the normaliser's sum is associated differently: per rank, then across ranks), the
//     padding's gradient exactly 0, and every rank returns the same total; in bf16 each
//     gradient within one bf16 rounding of the whole bf16 kernel's (2^-8 relative: the fp32
//     values before the one rounding differ by ~1e-7, so a rounding may land on the neighbour).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16_gemm_test_support.h"
#include "plait/core/error.h"
#include "plait/kernels/bf16_matmul.h"
#include "plait/kernels/cross_entropy.h"
#include "plait/kernels/embedding.h"
#include "plait/kernels/vector_ops.h"
#include "plait/kernels/vocab_parallel_cross_entropy.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

class Bf16PartialMatmul : public ::testing::TestWithParam<bool> {};  // the parameter: forced fallback

TEST_P(Bf16PartialMatmul, Fp32ResultsWithinTheAccumulationBound) {
  PathContext p(GetParam());
  PLAIT_SKIP_UNLESS_PATH(*p.context, GetParam());
  const int n = 17, c = 40, oc = 24;
  const auto inp = random_bf16(static_cast<std::size_t>(n) * c, 1);
  const auto w = random_bf16(static_cast<std::size_t>(oc) * c, 2);
  const auto dout = random_bf16(static_cast<std::size_t>(n) * oc, 3);
  std::vector<float> out(static_cast<std::size_t>(n) * oc);
  matmul_forward_bf16_fp32(*p.context, out.data(), inp.data(), w.data(), n, c, oc);
  BoundCheck check;
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < oc; ++o) {
      Reference ref;
      for (int j = 0; j < c; ++j) ref.add(double(plait::to_float(inp[i * c + j])) * plait::to_float(w[o * c + j]));
      check("out", i, o, out[i * oc + o], ref.sum, ref.bound_fp32());
    }
  }
  // The input gradient, written then accumulated (a second part added in fp32).
  std::vector<float> dinp(static_cast<std::size_t>(n) * c);
  matmul_backward_input_bf16_fp32(*p.context, dinp.data(), dout.data(), w.data(), n, c, oc, false);
  matmul_backward_input_bf16_fp32(*p.context, dinp.data(), dout.data(), w.data(), n, c, oc, true);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < c; ++j) {
      Reference ref;
      for (int o = 0; o < oc; ++o) ref.add(double(plait::to_float(dout[i * oc + o])) * plait::to_float(w[o * c + j]));
      for (int o = 0; o < oc; ++o) ref.add(double(plait::to_float(dout[i * oc + o])) * plait::to_float(w[o * c + j]));
      check("dinp", i, j, dinp[i * c + j], ref.sum, ref.bound_fp32());
    }
  }
  EXPECT_EQ(check.bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Paths, Bf16PartialMatmul, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "fallback" : "onednn"; });

TEST(AddBiasResidual, AddsInOrderAndRoundsOnce) {
  const int n = 3, c = 5;
  std::vector<float> sum(n * c), bias(c), residual(n * c), out(n * c);
  for (int i = 0; i < n * c; ++i) {
    sum[i] = 0.1f * static_cast<float>(i) - 0.7f;
    residual[i] = 1.0f + 1e-3f * static_cast<float>(i);
  }
  for (int j = 0; j < c; ++j) bias[j] = 0.25f * static_cast<float>(j);
  add_bias_residual<float>(out.data(), sum.data(), bias.data(), residual.data(), n, c);
  for (int i = 0; i < n * c; ++i) EXPECT_EQ(out[i], (sum[i] + bias[i % c]) + residual[i]);
  add_bias_residual<float>(out.data(), sum.data(), nullptr, nullptr, n, c);
  EXPECT_EQ(out, sum);
  std::vector<bf16> bb(c), rb(n * c);
  for (int j = 0; j < c; ++j) bb[j] = bf16(bias[j]);
  for (int i = 0; i < n * c; ++i) rb[i] = bf16(residual[i]);
  std::vector<bf16> ob(n * c);
  add_bias_residual<bf16>(ob.data(), sum.data(), bb.data(), rb.data(), n, c);
  for (int i = 0; i < n * c; ++i) {
    const float want = (sum[i] + plait::to_float(bb[i % c])) + plait::to_float(rb[i]);
    EXPECT_EQ(plait::to_float(ob[i]), plait::to_float(bf16(want)));
  }
}

// A table and tokens over a vocabulary of 300 split over t ranks of 256 / t... rows each (the
// padded table of 128 t multiples), positions from pos0.
template <typename T>
void check_embedding_shards(int t) {
  const int vocab = 300, c = 24, batch = 2, s = 5, pos0 = 3, n = batch * s;
  const int padded = (vocab + 128 * t - 1) / (128 * t) * (128 * t), rows = padded / t;
  std::vector<T> wte(static_cast<std::size_t>(padded) * c, T(0.0f)), wpe(static_cast<std::size_t>(pos0 + s) * c);
  const std::vector<double> a = random_vector(static_cast<std::size_t>(vocab) * c, 11);
  const std::vector<double> p = random_vector(wpe.size(), 12);
  for (std::size_t i = 0; i < a.size(); ++i) wte[i] = T(static_cast<float>(a[i]));
  for (std::size_t i = 0; i < p.size(); ++i) wpe[i] = T(static_cast<float>(p[i]));
  const std::vector<std::int32_t> tokens = {0, 299, 128, 127, 5, 255, 256, 42, 299, 0};
  std::vector<T> whole(static_cast<std::size_t>(n) * c);
  embedding_forward<T>(whole.data(), tokens.data(), wte.data(), wpe.data(), batch, s, c, pos0, vocab);
  std::vector<float> sum(whole.size(), 0.0f), part(whole.size());
  for (int r = 0; r < t; ++r) {
    embedding_forward_shard<T>(part.data(), tokens.data(), wte.data() + static_cast<std::size_t>(r) * rows * c,
                               r == 0 ? wpe.data() : nullptr, batch, s, c, pos0, vocab, r * rows, rows);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  std::vector<T> got(whole.size());
  add_bias_residual<T>(got.data(), sum.data(), nullptr, nullptr, n, c);
  for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(plait::to_float(got[i]), plait::to_float(whole[i])) << i;

  // Backward: the whole gradient of the output on every rank (gathered).
  std::vector<T> dout(whole.size());
  const std::vector<double> g = random_vector(dout.size(), 13);
  for (std::size_t i = 0; i < g.size(); ++i) dout[i] = T(static_cast<float>(g[i]));
  std::vector<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  embedding_backward<T>(dwte.data(), dwpe.data(), dout.data(), tokens.data(), batch, s, c, pos0);
  for (int r = 0; r < t; ++r) {
    std::vector<float> rows_grad(static_cast<std::size_t>(rows) * c, 0.0f), pos_grad(wpe.size(), 0.0f);
    embedding_backward_shard<T>(rows_grad.data(), pos_grad.data(), dout.data(), tokens.data(), batch, s, c, pos0,
                                r * rows, rows);
    EXPECT_TRUE(std::equal(rows_grad.begin(), rows_grad.end(), dwte.begin() + static_cast<std::ptrdiff_t>(r) * rows * c))
        << "rank " << r;
    EXPECT_EQ(pos_grad, dwpe) << "rank " << r;
  }
  // A token outside the vocabulary is refused, as by the whole lookup.
  const std::vector<std::int32_t> bad = {300};
  EXPECT_THROW(embedding_forward_shard<T>(part.data(), bad.data(), wte.data(), nullptr, 1, 1, c, 0, vocab, 0, rows),
               Error);
}

TEST(EmbeddingShard, PartsSumToTheWholeLookupBitwiseFp32) {
  for (int t : {2, 4}) check_embedding_shards<float>(t);
}
TEST(EmbeddingShard, PartsSumToTheWholeLookupBitwiseBf16) {
  for (int t : {2, 4}) check_embedding_shards<bf16>(t);
}

// The three passes over t ranks' parts, the group's reductions done here in rank order.
template <typename T>
void vocab_parallel(std::vector<std::vector<T>>& parts, const std::vector<std::int32_t>& targets, int n, int rows,
                    int vocab, double scale, std::vector<float>& losses, std::vector<double>& totals) {
  const int t = static_cast<int>(parts.size());
  std::vector<float> max(n, -INFINITY), target(n, 0.0f), m(n), tl(n);
  std::vector<double> sum(n, 0.0), s(n);
  const auto valid = [&](int r) { return std::clamp(vocab - r * rows, 0, rows); };
  for (int r = 0; r < t; ++r) {
    cross_entropy_shard_max<T>(parts[r].data(), targets.data(), n, rows, valid(r), r * rows, vocab, m.data(), tl.data());
    for (int i = 0; i < n; ++i) {
      max[i] = std::max(max[i], m[i]);
      target[i] += tl[i];
    }
  }
  for (int r = 0; r < t; ++r) {
    cross_entropy_shard_sum<T>(parts[r].data(), n, rows, valid(r), max.data(), s.data());
    for (int i = 0; i < n; ++i) sum[i] += s[i];
  }
  totals.clear();
  losses.assign(n, 0.0f);
  for (int r = 0; r < t; ++r) {
    totals.push_back(cross_entropy_shard_finish<T>(parts[r].data(), losses.data(), targets.data(), n, rows, valid(r),
                                                   r * rows, max.data(), sum.data(), target.data(), scale));
  }
}

template <typename T>
void check_cross_entropy(int t) {
  const int n = 7, vocab = 300;
  const int padded = (vocab + 128 * t - 1) / (128 * t) * (128 * t), rows = padded / t;
  const double scale = 1.0 / 24;
  const std::vector<double> x = random_vector(static_cast<std::size_t>(n) * vocab, 21);
  std::vector<T> whole(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) whole[i] = T(static_cast<float>(3.0 * x[i]));
  // The last row has no target (a packed sequence's padding): loss 0, gradient 0 on every rank.
  const std::vector<std::int32_t> targets = {0, 299, 128, 127, 255, 256, kNoTarget};
  // The parts, padding columns filled with large logits the kernels must ignore.
  std::vector<std::vector<T>> parts(static_cast<std::size_t>(t), std::vector<T>(static_cast<std::size_t>(n) * rows));
  for (int r = 0; r < t; ++r) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < rows; ++j) {
        const int col = r * rows + j;
        parts[r][static_cast<std::size_t>(i) * rows + j] = col < vocab ? whole[static_cast<std::size_t>(i) * vocab + col] : T(50.0f);
      }
    }
  }
  std::vector<float> want_losses(n);
  const double want = cross_entropy_forward_backward<T>(whole.data(), want_losses.data(), targets.data(), n, vocab, scale);
  std::vector<float> losses;
  std::vector<double> totals;
  vocab_parallel<T>(parts, targets, n, rows, vocab, scale, losses, totals);
  for (double total : totals) {
    EXPECT_EQ(total, totals[0]);
    EXPECT_NEAR(total, want, 1e-6 * std::abs(want));
  }
  for (int i = 0; i < n; ++i) EXPECT_NEAR(losses[i], want_losses[i], 1e-6 * std::abs(want_losses[i])) << i;
  for (int r = 0; r < t; ++r) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < rows; ++j) {
        const int col = r * rows + j;
        const double got = plait::to_float(parts[r][static_cast<std::size_t>(i) * rows + j]);
        if (col >= vocab) {
          ASSERT_EQ(got, 0.0) << "padding column " << col;
          continue;
        }
        const double w = plait::to_float(whole[static_cast<std::size_t>(i) * vocab + col]);
        const double bound = std::is_same_v<T, float> ? 1e-6 * std::abs(scale) : 0x1p-8 * std::abs(w) + 1e-9;
        ASSERT_NEAR(got, w, bound) << "row " << i << " column " << col;
      }
    }
  }
}

TEST(VocabParallelCrossEntropy, MatchesTheWholeVocabularyFp32) {
  for (int t : {1, 2, 4}) check_cross_entropy<float>(t);
}
TEST(VocabParallelCrossEntropy, MatchesTheWholeVocabularyBf16) {
  for (int t : {2, 4}) check_cross_entropy<bf16>(t);
}
TEST(VocabParallelCrossEntropy, RefusesTargetsOutsideTheVocabulary) {
  std::vector<float> logits(4, 0.0f), max(1), target(1);
  const std::vector<std::int32_t> bad = {4};
  EXPECT_THROW(cross_entropy_shard_max<float>(logits.data(), bad.data(), 1, 4, 4, 0, 4, max.data(), target.data()),
               Error);
}

}  // namespace
}  // namespace plait::kernels
