#include "plait/kernels/attention.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>

#include "finite_difference.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

// A query segment of length s at the end of a sequence whose K/V arrive in blocks.
struct Case {
  int batch, heads, c, s;
  std::vector<int> lengths;  // K/V blocks; the queries are the last s positions
  int e() const {
    int e = 0;
    for (int l : lengths) e += l;
    return e;
  }
};

// Direct definition: for query position p = start + r, softmax over keys 0..p.
std::vector<double> reference_forward(const Case& cs, const std::vector<double>& q,
                                      const std::vector<std::vector<double>>& kv) {
  const int e = cs.e(), start = e - cs.s, d = cs.c / cs.heads, c = cs.c;
  std::vector<double> out(static_cast<std::size_t>(cs.batch) * cs.s * c);
  for (int b = 0; b < cs.batch; ++b) {
    // Gather K and V of all positions.
    std::vector<const double*> key(e), val(e);
    int pos = 0;
    for (std::size_t i = 0; i < cs.lengths.size(); ++i) {
      for (int t = 0; t < cs.lengths[i]; ++t, ++pos) {
        const double* row = kv[i].data() + (static_cast<std::size_t>(b) * cs.lengths[i] + t) * 2 * c;
        key[pos] = row;
        val[pos] = row + c;
      }
    }
    for (int h = 0; h < cs.heads; ++h) {
      for (int r = 0; r < cs.s; ++r) {
        const double* qq = q.data() + (static_cast<std::size_t>(b) * cs.s + r) * c + h * d;
        const int valid = start + r + 1;
        std::vector<double> w(valid);
        double m = -1e300, sum = 0;
        for (int j = 0; j < valid; ++j) {
          double dotp = 0;
          for (int k = 0; k < d; ++k) dotp += qq[k] * key[j][h * d + k];
          w[j] = dotp / std::sqrt(double(d));
          m = std::max(m, w[j]);
        }
        for (int j = 0; j < valid; ++j) sum += (w[j] = std::exp(w[j] - m));
        double* o = out.data() + (static_cast<std::size_t>(b) * cs.s + r) * c + h * d;
        for (int k = 0; k < d; ++k) {
          double acc = 0;
          for (int j = 0; j < valid; ++j) acc += w[j] / sum * val[j][h * d + k];
          o[k] = acc;
        }
      }
    }
  }
  return out;
}

template <typename T>
struct Run {
  std::vector<T> out, probs, dq;
  std::vector<std::vector<T>> dkv;
};

template <typename T>
Run<T> run_kernel(const Case& cs, const std::vector<T>& q, const std::vector<std::vector<T>>& kv,
                  const std::vector<T>& dout, T dkv_initial) {
  Run<T> run;
  const int e = cs.e();
  run.out.resize(static_cast<std::size_t>(cs.batch) * cs.s * cs.c);
  run.probs.resize(static_cast<std::size_t>(cs.batch) * cs.heads * cs.s * e, T(-7));
  run.dq.resize(run.out.size());
  std::vector<KVBlock<T>> blocks;
  for (std::size_t i = 0; i < kv.size(); ++i) run.dkv.emplace_back(kv[i].size(), dkv_initial);
  for (std::size_t i = 0; i < kv.size(); ++i) {
    blocks.push_back({kv[i].data(), run.dkv[i].data(), cs.lengths[i]});
  }
  attention_forward<T>(run.out.data(), run.probs.data(), q.data(), blocks, cs.batch, cs.s, cs.c,
                       cs.heads);
  std::vector<T> workspace(attention_backward_workspace(cs.s, e, omp_get_max_threads()));
  attention_backward<T>(run.dq.data(), blocks, dout.data(), q.data(), run.probs.data(), cs.batch,
                        cs.s, cs.c, cs.heads, workspace.data());
  return run;
}

void check_against_definition(const Case& cs, bool finite_differences = true) {
  auto q = random_vector(static_cast<std::size_t>(cs.batch) * cs.s * cs.c, 1);
  std::vector<std::vector<double>> kv;
  for (std::size_t i = 0; i < cs.lengths.size(); ++i) {
    kv.push_back(random_vector(static_cast<std::size_t>(cs.batch) * cs.lengths[i] * 2 * cs.c,
                               10 + i));
  }
  auto probe = random_vector(q.size(), 2);
  const double initial = 0.75;  // dkv starts non-zero: backward must accumulate into it
  const Run<double> run = run_kernel<double>(cs, q, kv, probe, initial);

  EXPECT_LT(scaled_max_error(run.out, reference_forward(cs, q, kv)), 1e-12);
  // Every row of probs sums to one and is zero past the query's own position, up to the end of
  // its query block (beyond that it is not written: the -7 fill stays).
  const int e = cs.e(), start = e - cs.s;
  for (int row = 0; row < cs.batch * cs.heads * cs.s; ++row) {
    const int r = row % cs.s;
    const int block_end = start + std::min(cs.s, (r / kAttentionQueryBlock + 1) * kAttentionQueryBlock);
    double sum = 0;
    for (int j = 0; j < block_end; ++j) {
      const double p = run.probs[static_cast<std::size_t>(row) * e + j];
      if (j > start + r) {
        EXPECT_EQ(p, 0.0);
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  if (finite_differences) {
    auto loss = [&] { return dot(probe, reference_forward(cs, q, kv)); };
    EXPECT_LT(scaled_max_error(run.dq, numeric_gradient(loss, q)), kGradientTolerance);
    for (std::size_t i = 0; i < kv.size(); ++i) {
      std::vector<double> dkv = run.dkv[i];
      for (auto& v : dkv) v -= initial;
      EXPECT_LT(scaled_max_error(dkv, numeric_gradient(loss, kv[i])), kGradientTolerance)
          << "block " << i;
    }
  }

  // fp32 against fp64.
  std::vector<std::vector<float>> kvf;
  for (const auto& b : kv) kvf.push_back(to_float(b));
  const Run<float> runf = run_kernel<float>(cs, to_float(q), kvf, to_float(probe), 0.75f);
  EXPECT_LT(scaled_max_error(to_double(runf.out), run.out), kFloatTolerance);
  EXPECT_LT(scaled_max_error(to_double(runf.dq), run.dq), kFloatTolerance);
  for (std::size_t i = 0; i < kv.size(); ++i) {
    EXPECT_LT(scaled_max_error(to_double(runf.dkv[i]), run.dkv[i]), kFloatTolerance);
  }
}

TEST(Attention, WholeSequenceMatchesDefinitionAndFiniteDifferences) {
  check_against_definition({2, 2, 6, 7, {7}});
}

TEST(Attention, SegmentWithKVPrefixBlocksMatchesDefinitionAndFiniteDifferences) {
  // Queries are the last 4 of 10 positions; K/V come as blocks of 3, 1, 2 and the own 4.
  check_against_definition({2, 3, 6, 4, {3, 1, 2, 4}});
}

TEST(Attention, QueryBlockingAcrossManyRowsMatchesDefinitionAndFiniteDifferences) {
  // More query rows than one block, so the causal block skipping is exercised.
  check_against_definition({1, 1, 2, kAttentionQueryBlock + 9, {5, kAttentionQueryBlock + 9}});
}

TEST(Attention, ThreadedPathMatchesDefinitionAndFloatMatchesDouble) {
  // Big enough for the OpenMP path (one BLAS call per head and query block on each thread);
  // the gradients are the same code as above, so no finite differences here.
  check_against_definition({2, 4, 64, 2 * kAttentionQueryBlock + 3, {50, 2 * kAttentionQueryBlock + 3}},
                           false);
}

}  // namespace
}  // namespace plait::kernels
