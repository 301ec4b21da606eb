#include "plait/kernels/attention.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>

#include "finite_difference.h"
#include "plait/core/error.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

// A query segment of length s at the end of a sequence whose K/V arrive in blocks.
struct Case {
  int batch, heads, c, s;
  std::vector<int> lengths;  // K/V blocks; the queries are the last s positions
  int kv_heads = 0;          // grouped-query attention; 0: as many as query heads
  int e() const {
    int e = 0;
    for (int l : lengths) e += l;
    return e;
  }
  int kvh() const { return kv_heads ? kv_heads : heads; }
  int ckv() const { return kvh() * (c / heads); }  // K (and V) columns of a K/V row
  std::size_t block_size(std::size_t i) const {
    return static_cast<std::size_t>(batch) * lengths[i] * 2 * ckv();
  }
};

// Direct definition: for query position p = start + r, softmax over keys 0..p, query head h
// reading K/V head h / (heads / kv_heads).
std::vector<double> reference_forward(const Case& cs, const std::vector<double>& q,
                                      const std::vector<std::vector<double>>& kv) {
  const int e = cs.e(), start = e - cs.s, d = cs.c / cs.heads, c = cs.c, ckv = cs.ckv();
  const int group = cs.heads / cs.kvh();
  std::vector<double> out(static_cast<std::size_t>(cs.batch) * cs.s * c);
  for (int b = 0; b < cs.batch; ++b) {
    // Gather K and V of all positions.
    std::vector<const double*> key(e), val(e);
    int pos = 0;
    for (std::size_t i = 0; i < cs.lengths.size(); ++i) {
      for (int t = 0; t < cs.lengths[i]; ++t, ++pos) {
        const double* row =
            kv[i].data() + (static_cast<std::size_t>(b) * cs.lengths[i] + t) * 2 * ckv;
        key[pos] = row;
        val[pos] = row + ckv;
      }
    }
    for (int h = 0; h < cs.heads; ++h) {
      const int kh = (h / group) * d;  // the K/V head's columns
      for (int r = 0; r < cs.s; ++r) {
        const double* qq = q.data() + (static_cast<std::size_t>(b) * cs.s + r) * c + h * d;
        const int valid = start + r + 1;
        std::vector<double> w(valid);
        double m = -1e300, sum = 0;
        for (int j = 0; j < valid; ++j) {
          double dotp = 0;
          for (int k = 0; k < d; ++k) dotp += qq[k] * key[j][kh + k];
          w[j] = dotp / std::sqrt(double(d));
          m = std::max(m, w[j]);
        }
        for (int j = 0; j < valid; ++j) sum += (w[j] = std::exp(w[j] - m));
        double* o = out.data() + (static_cast<std::size_t>(b) * cs.s + r) * c + h * d;
        for (int k = 0; k < d; ++k) {
          double acc = 0;
          for (int j = 0; j < valid; ++j) acc += w[j] / sum * val[j][kh + k];
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
                       cs.heads, cs.kvh());
  std::vector<T> workspace(attention_backward_workspace(cs.s, e, omp_get_max_threads()));
  attention_backward<T>(run.dq.data(), blocks, dout.data(), q.data(), run.probs.data(), cs.batch,
                        cs.s, cs.c, cs.heads, cs.kvh(), workspace.data());
  return run;
}

struct Inputs {
  std::vector<double> q, probe;         // probe: the gradient of the output
  std::vector<std::vector<double>> kv;  // one per block
};

Inputs random_inputs(const Case& cs) {
  Inputs in;
  in.q = random_vector(static_cast<std::size_t>(cs.batch) * cs.s * cs.c, 1);
  for (std::size_t i = 0; i < cs.lengths.size(); ++i) {
    in.kv.push_back(random_vector(cs.block_size(i), 10 + i));
  }
  in.probe = random_vector(in.q.size(), 2);
  return in;
}

std::vector<std::vector<float>> to_float(const std::vector<std::vector<double>>& blocks) {
  std::vector<std::vector<float>> out;
  for (const auto& b : blocks) out.push_back(testing::to_float(b));
  return out;
}

void check_against_definition(const Case& cs, bool finite_differences = true) {
  Inputs in = random_inputs(cs);
  auto& q = in.q;
  auto& kv = in.kv;
  const auto& probe = in.probe;
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
  const Run<float> runf =
      run_kernel<float>(cs, testing::to_float(q), to_float(kv), testing::to_float(probe), 0.75f);
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

// Grouped-query attention (kv_heads < heads).

TEST(Attention, GroupedQueriesWithKVPrefixMatchDefinitionAndFiniteDifferences) {
  // 4 query heads on 2 K/V heads; queries are the last 5 of 10 positions, K/V in blocks 3, 2, 5.
  check_against_definition({2, 4, 8, 5, {3, 2, 5}, 2});
}

TEST(Attention, MultiQueryMatchesDefinitionAndFiniteDifferences) {
  check_against_definition({1, 3, 6, 4, {2, 4}, 1});  // one K/V head for all queries
}

TEST(Attention, GroupedThreadedPathMatchesDefinitionAndFloatMatchesDouble) {
  check_against_definition(
      {2, 8, 64, 2 * kAttentionQueryBlock + 3, {50, 2 * kAttentionQueryBlock + 3}, 2}, false);
}

// A block's K/V with each K/V head copied to the g query heads of its group (Hugging Face's
// repeat_kv): (B, length, 2 Ckv) -> (B, length, 2C).
std::vector<double> repeat_kv(const Case& cs, const std::vector<double>& kv, int length) {
  const int d = cs.c / cs.heads, group = cs.heads / cs.kvh(), ckv = cs.ckv(), c = cs.c;
  std::vector<double> out(static_cast<std::size_t>(cs.batch) * length * 2 * c);
  for (int row = 0; row < cs.batch * length; ++row) {
    for (int h = 0; h < cs.heads; ++h) {
      for (int k = 0; k < d; ++k) {
        const std::size_t src = static_cast<std::size_t>(row) * 2 * ckv + (h / group) * d + k;
        const std::size_t dst = static_cast<std::size_t>(row) * 2 * c + h * d + k;
        out[dst] = kv[src];            // K
        out[dst + c] = kv[src + ckv];  // V
      }
    }
  }
  return out;
}

// GQA = multi-head attention on the repeated K/V; a K/V head's gradient is the sum of its
// copies' gradients (the backward of repeat_kv).
void check_against_repeated_kv(const Case& cs) {
  const Inputs in = random_inputs(cs);
  Case mha = cs;
  mha.kv_heads = 0;
  std::vector<std::vector<double>> kv_repeated;
  for (std::size_t i = 0; i < in.kv.size(); ++i) {
    kv_repeated.push_back(repeat_kv(cs, in.kv[i], cs.lengths[i]));
  }
  const double initial = 0.75;
  const Run<double> gqa = run_kernel<double>(cs, in.q, in.kv, in.probe, initial);
  const Run<double> ref = run_kernel<double>(mha, in.q, kv_repeated, in.probe, 0.0);
  EXPECT_LT(scaled_max_error(gqa.out, ref.out), 1e-14);
  EXPECT_LT(scaled_max_error(gqa.probs, ref.probs), 1e-14);
  EXPECT_LT(scaled_max_error(gqa.dq, ref.dq), 1e-14);
  const int d = cs.c / cs.heads, group = cs.heads / cs.kvh(), ckv = cs.ckv(), c = cs.c;
  for (std::size_t i = 0; i < in.kv.size(); ++i) {
    std::vector<double> summed(gqa.dkv[i].size(), 0.0), got = gqa.dkv[i];
    for (auto& v : got) v -= initial;
    for (int row = 0; row < cs.batch * cs.lengths[i]; ++row) {
      for (int h = 0; h < cs.heads; ++h) {
        for (int k = 0; k < d; ++k) {
          const std::size_t dst = static_cast<std::size_t>(row) * 2 * ckv + (h / group) * d + k;
          const std::size_t src = static_cast<std::size_t>(row) * 2 * c + h * d + k;
          summed[dst] += ref.dkv[i][src];
          summed[dst + ckv] += ref.dkv[i][src + c];
        }
      }
    }
    EXPECT_LT(scaled_max_error(got, summed), 1e-14) << "block " << i;
  }
}

TEST(Attention, GroupedEqualsMultiHeadOnRepeatedKV) {
  check_against_repeated_kv({2, 6, 12, 5, {4, 3, 5}, 3});  // g = 2, with a K/V prefix
  check_against_repeated_kv({1, 4, 8, kAttentionQueryBlock + 5, {40, kAttentionQueryBlock + 5}, 1});
}

TEST(Attention, GroupedThreadedEqualsMultiHeadOnRepeatedKV) {
  // Threaded (one (batch row, K/V head) per item backward), several query blocks, g = 4.
  check_against_repeated_kv(
      {2, 8, 128, 2 * kAttentionQueryBlock + 3, {50, 2 * kAttentionQueryBlock + 3}, 2});
}

TEST(Attention, GroupedBackwardIsTheSameForAnyThreadCount) {
  // All 4 query heads share one K/V head, with head dimension 64: a backward that let threads
  // accumulate into a shared dK/dV (or in an order set by the schedule) would differ from the
  // one-thread result in its last bits, or lose updates. 16 runs, as a race shows by chance.
  const Case cs{1, 4, 256, 2 * kAttentionQueryBlock + 3, {50, 2 * kAttentionQueryBlock + 3}, 1};
  const Inputs in = random_inputs(cs);
  const auto q = testing::to_float(in.q), probe = testing::to_float(in.probe);
  const auto kv = to_float(in.kv);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run_kernel<float>(cs, q, kv, probe, 0.75f);
  omp_set_num_threads(std::max(threads, 4));
  for (int run = 0; run < 16; ++run) {
    const auto many = run_kernel<float>(cs, q, kv, probe, 0.75f);
    EXPECT_EQ(one.out, many.out);
    EXPECT_EQ(one.dq, many.dq);
    for (std::size_t i = 0; i < kv.size(); ++i) {
      EXPECT_EQ(one.dkv[i], many.dkv[i]) << "block " << i << ", run " << run;
    }
  }
  omp_set_num_threads(threads);
}

TEST(Attention, RejectsKVHeadsNotDividingHeads) {
  // 4 heads of 2 on 8 columns; K/V rows as for 3 K/V heads.
  std::vector<float> q(24), kv(3 * 2 * 6), out(24), probs(4 * 9), dkv(kv.size());
  const std::vector<KVBlock<float>> blocks = {{kv.data(), dkv.data(), 3}};
  std::vector<float> workspace(attention_backward_workspace(3, 3, omp_get_max_threads()));
  for (int kv_heads : {3, 0, 8}) {
    EXPECT_THROW(
        attention_forward<float>(out.data(), probs.data(), q.data(), blocks, 1, 3, 8, 4, kv_heads),
        Error)
        << kv_heads;
    EXPECT_THROW(attention_backward<float>(q.data(), blocks, out.data(), q.data(), probs.data(), 1,
                                           3, 8, 4, kv_heads, workspace.data()),
                 Error)
        << kv_heads;
  }
}

}  // namespace
}  // namespace plait::kernels
