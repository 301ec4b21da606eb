// The tiled (FlashAttention-2) attention kernels against a direct fp64 definition that
// materialises the probabilities: whole sequences, Seq1F1B segments whose K/V prefix comes in
// blocks (shorter and longer than a key tile, e > s), query segments not a multiple of the query
// tile, batch > 1, grouped-query and multi-query heads; the fp64 kernel also against finite
// differences, fp32 and bf16 against fp64 with stated bounds, and every precision bitwise the
// same for any thread count.
#include "plait/kernels/attention.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "finite_difference.h"
#include "plait/kernels/attention_path.h"
#include "plait/core/error.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;
using spec::kAttentionKeyTile;
using spec::kAttentionQueryTile;

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
  int d() const { return c / heads; }
  int kvh() const { return kv_heads ? kv_heads : heads; }
  int ckv() const { return kvh() * d(); }  // K (and V) columns of a K/V row
  std::size_t q_size() const { return static_cast<std::size_t>(batch) * s * c; }
  std::size_t block_size(std::size_t i) const {
    return static_cast<std::size_t>(batch) * lengths[i] * 2 * ckv();
  }
};

// The direct definition in fp64, with the probabilities of each row materialised: for query
// position p = start + r, P = softmax over keys 0..p of q.k / sqrt(d), query head h reading K/V
// head h / (heads / kv_heads); out = P v; lse = log sum exp of the scaled scores. Backward (the
// textbook softmax backward): dP = dout v^T, dS = P * (dP - rowsum(P * dP)), dq = dS k / sqrt(d),
// dk = dS^T q / sqrt(d), dv = P^T dout.
//
// Beside each result, the magnitudes its error bounds are stated in (bf16_bound below): `terms`,
// the sum of its terms' absolute values (out: sum_j P|v|, dv: sum_i P|dout|, dq, dk: sum |dS||k|
// and sum |dS||q| over sqrt(d)); `inputs`, the same with dS replaced by P (|dP| + |D|) where dP
// and D are themselves sums of absolute values (what bounds dS and its fp32 error whatever the
// cancellation in dP - D).
struct Reference {
  std::vector<double> out, lse, dq;
  std::vector<std::vector<double>> dkv;  // the gradient alone (no initial value)
  std::vector<double> out_terms, dq_terms, dq_inputs;
  std::vector<std::vector<double>> dkv_terms, dkv_inputs;
};

// out_for_d: where given, the output the backward's D = rowsum(dout * out) reads (the bf16
// kernel's backward reads its forward's stored, rounded output: an input of the backward).
Reference reference(const Case& cs, const std::vector<double>& q,
                    const std::vector<std::vector<double>>& kv, const std::vector<double>* dout,
                    const std::vector<double>* out_for_d = nullptr) {
  const int e = cs.e(), start = e - cs.s, d = cs.d(), c = cs.c, ckv = cs.ckv();
  const int group = cs.heads / cs.kvh();
  const double scale = 1 / std::sqrt(double(d));
  Reference ref;
  ref.out.assign(cs.q_size(), 0.0);
  ref.dq.assign(cs.q_size(), 0.0);
  ref.lse.assign(static_cast<std::size_t>(cs.batch) * cs.heads * cs.s, 0.0);
  ref.out_terms = ref.dq_terms = ref.dq_inputs = ref.dq;
  for (std::size_t i = 0; i < kv.size(); ++i) ref.dkv.emplace_back(kv[i].size(), 0.0);
  ref.dkv_terms = ref.dkv_inputs = ref.dkv;
  for (int b = 0; b < cs.batch; ++b) {
    // Every position's K and V rows (and their gradients).
    std::vector<const double*> key(e), val(e);
    std::vector<double*> dkey(e), dval(e), tkey(e), tval(e), ikey(e);
    int pos = 0;
    for (std::size_t i = 0; i < cs.lengths.size(); ++i) {
      for (int t = 0; t < cs.lengths[i]; ++t, ++pos) {
        const std::size_t row = (static_cast<std::size_t>(b) * cs.lengths[i] + t) * 2 * ckv;
        key[pos] = kv[i].data() + row;
        val[pos] = key[pos] + ckv;
        dkey[pos] = ref.dkv[i].data() + row;
        dval[pos] = dkey[pos] + ckv;
        tkey[pos] = ref.dkv_terms[i].data() + row;
        tval[pos] = tkey[pos] + ckv;
        ikey[pos] = ref.dkv_inputs[i].data() + row;
      }
    }
    for (int h = 0; h < cs.heads; ++h) {
      const int kh = (h / group) * d;  // the K/V head's columns
      for (int r = 0; r < cs.s; ++r) {
        const std::size_t at = (static_cast<std::size_t>(b) * cs.s + r) * c + h * d;
        const double* qq = q.data() + at;
        const int valid = start + r + 1;
        std::vector<double> p(valid);
        double m = -1e300, sum = 0;
        for (int j = 0; j < valid; ++j) {
          double dotp = 0;
          for (int k = 0; k < d; ++k) dotp += qq[k] * key[j][kh + k];
          p[j] = dotp * scale;
          m = std::max(m, p[j]);
        }
        for (int j = 0; j < valid; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int j = 0; j < valid; ++j) p[j] /= sum;
        ref.lse[(static_cast<std::size_t>(b) * cs.heads + h) * cs.s + r] = m + std::log(sum);
        for (int k = 0; k < d; ++k) {
          double acc = 0, terms = 0;
          for (int j = 0; j < valid; ++j) {
            acc += p[j] * val[j][kh + k];
            terms += p[j] * std::abs(val[j][kh + k]);
          }
          ref.out[at + k] = acc;
          ref.out_terms[at + k] = terms;
        }
        if (!dout) continue;
        const double* g = dout->data() + at;
        const std::vector<double>& o = out_for_d ? *out_for_d : ref.out;
        std::vector<double> ds(valid), bound_ds(valid);
        double rowsum = 0, rowsum_abs = 0;  // D = rowsum(P * dP) = rowsum(dout * out)
        for (int k = 0; k < d; ++k) rowsum_abs += std::abs(g[k] * o[at + k]);
        for (int j = 0; j < valid; ++j) {
          double dp = 0, dp_abs = 0;
          for (int k = 0; k < d; ++k) {
            dp += g[k] * val[j][kh + k];
            dp_abs += std::abs(g[k] * val[j][kh + k]);
          }
          ds[j] = dp;
          bound_ds[j] = p[j] * (dp_abs + rowsum_abs);
          rowsum += p[j] * dp;
        }
        if (out_for_d) {
          rowsum = 0;
          for (int k = 0; k < d; ++k) rowsum += g[k] * (*out_for_d)[at + k];
        }
        for (int j = 0; j < valid; ++j) {
          ds[j] = p[j] * (ds[j] - rowsum);
          for (int k = 0; k < d; ++k) {
            ref.dq[at + k] += ds[j] * key[j][kh + k] * scale;
            dkey[j][kh + k] += ds[j] * qq[k] * scale;
            dval[j][kh + k] += p[j] * g[k];
            ref.dq_terms[at + k] += std::abs(ds[j] * key[j][kh + k]) * scale;
            ref.dq_inputs[at + k] += bound_ds[j] * std::abs(key[j][kh + k]) * scale;
            tkey[j][kh + k] += std::abs(ds[j] * qq[k]) * scale;
            ikey[j][kh + k] += bound_ds[j] * std::abs(qq[k]) * scale;
            tval[j][kh + k] += p[j] * std::abs(g[k]);
          }
        }
      }
    }
  }
  return ref;
}

// The kernels' outputs in their own types (T, and Acc<T> for lse and dK/dV).
template <typename T>
struct Run {
  std::vector<T> out, dq;
  std::vector<Acc<T>> lse;
  std::vector<std::vector<Acc<T>>> dkv;
};

template <typename T>
Run<T> run_kernel(const Case& cs, const std::vector<T>& q, const std::vector<std::vector<T>>& kv,
                  const std::vector<T>& dout, double dkv_initial) {
  Run<T> run;
  run.out.resize(cs.q_size(), T(-7.0f));
  run.dq.resize(cs.q_size(), T(-7.0f));
  run.lse.resize(static_cast<std::size_t>(cs.batch) * cs.heads * cs.s, Acc<T>(-7));
  std::vector<KVBlock<T>> blocks;
  for (std::size_t i = 0; i < kv.size(); ++i) run.dkv.emplace_back(kv[i].size(), dkv_initial);
  for (std::size_t i = 0; i < kv.size(); ++i) {
    blocks.push_back({kv[i].data(), run.dkv[i].data(), cs.lengths[i]});
  }
  attention_forward<T>(run.out.data(), run.lse.data(), q.data(), blocks, cs.batch, cs.s, cs.c,
                       cs.heads, cs.kvh());
  std::vector<Acc<T>> workspace(attention_backward_workspace(cs.d(), omp_get_max_threads()),
                                Acc<T>(-7));
  attention_backward<T>(run.dq.data(), blocks, dout.data(), q.data(), run.out.data(),
                        run.lse.data(), cs.batch, cs.s, cs.c, cs.heads, cs.kvh(),
                        workspace.data());
  return run;
}

// Values as T stores them, and back.
template <typename T>
std::vector<T> stored(const std::vector<double>& v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    std::vector<T> out;
    out.reserve(v.size());
    for (double x : v) out.push_back(T(static_cast<float>(x)));
    return out;
  }
}
template <typename T>
std::vector<double> widened(const std::vector<T>& v) {
  std::vector<double> out;
  out.reserve(v.size());
  for (const T& x : v) out.push_back(static_cast<double>(static_cast<Acc<T>>(x)));
  return out;
}

struct Inputs {
  std::vector<double> q, probe;         // probe: the gradient of the output
  std::vector<std::vector<double>> kv;  // one per block
};

Inputs random_inputs(const Case& cs) {
  Inputs in;
  in.q = random_vector(cs.q_size(), 1);
  for (std::size_t i = 0; i < cs.lengths.size(); ++i) {
    in.kv.push_back(random_vector(cs.block_size(i), 10 + i));
  }
  in.probe = random_vector(in.q.size(), 2);
  return in;
}

// The inputs as T stores them (bf16: rounded), so that the fp64 reference can be given the same.
template <typename T>
Inputs rounded(const Inputs& in) {
  Inputs r;
  r.q = widened(stored<T>(in.q));
  r.probe = widened(stored<T>(in.probe));
  for (const auto& b : in.kv) r.kv.push_back(widened(stored<T>(b)));
  return r;
}

// bf16 against fp64 on the same bf16-rounded inputs: q, K/V and dout rounded to bf16 (unit
// roundoff u = 2^-8: 8 significant bits, round to nearest), and the backward's `out` as the
// forward stored it; the inputs' rounding is thereby the reference's too, and what remains is
// the kernel's own error. Element by element (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed.: a rounding errs by at most u of its value, eq. 2.4; a sum of n terms
// in fp32 by at most gamma_n = n u32 / (1 - n u32) of the sum of the terms' magnitudes, eq.
// 3.5, u32 = 2^-24):
//   |got - ref| <= r u |ref| + rho u terms + u/4 inputs,
// r = bf16 roundings of the result itself (out and dq: 1, their store; lse, dK, dV: 0, kept in
// fp32); rho = 1 where the result is a product with a factor the kernel rounds to bf16 first
// (the vdpbf16ps path rounds P before P v and P^T dout, and dS / sqrt(d) before dS^T q and
// dS k: each term then errs by u of itself, at most u `terms` in all), 0 on the widened path
// (fp32 P and dS); `terms` and `inputs` as Reference computes them. The quarter of u on
// `inputs` is all the fp32 work: the sums over n <= max(d, e, g s) <= 2^12 terms err by
// gamma_n <= 2^-12 = u/16 of their magnitudes; the scores' fp32 error (gamma_d of
// sum |q||k| / sqrt(d), a few 1e-5 here) and exp_fast's 2^-23 make a relative error of P far
// below u/16; dP's and D's fp32 errors are gamma_d of the magnitudes `inputs` is made of; and
// vdpbf16ps's flushing of denormals errs by at most 2^-126 a term. Over the whole result, as
// scaled_max_error measures it (divided by max |ref|):
//   bound = r u + (rho u max terms + u/4 max inputs) / max |ref|.
double bf16_bound(int roundings, bool rounded_factor, const std::vector<double>& ref,
                  const std::vector<double>& terms, const std::vector<double>& inputs) {
  constexpr double u = 1.0 / 256;
  double scale = 0, t = 0, in = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::abs(ref[i]));
    t = std::max(t, terms[i]);
    in = std::max(in, inputs[i]);
  }
  return roundings * u + ((rounded_factor ? u * t : 0.0) + u / 4 * in) / scale;
}

// The kernel in precision T on `in` (rounded to T first) against the fp64 definition on the same
// rounded inputs (for bf16 also the backward's input `out`, as the kernel stored it): scaled
// errors (finite_difference.h) of out, lse, dq and each block's dK/dV, whose accumulators start
// at 0.75 (the backward must add to them); for bf16 also the bounds above.
struct Errors {
  double out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
};
struct Measured {
  Errors error, bound;  // bound: bf16_bound's, for T = bf16
};

template <typename T>
Measured errors_against_reference(const Case& cs, const Inputs& in) {
  const double initial = 0.75;
  const Inputs r = rounded<T>(in);
  std::vector<std::vector<T>> kv;
  for (const auto& b : in.kv) kv.push_back(stored<T>(b));
  const Run<T> run = run_kernel<T>(cs, stored<T>(in.q), kv, stored<T>(in.probe), initial);
  const std::vector<double> stored_out = widened(run.out);
  const Reference ref =
      reference(cs, r.q, r.kv, &r.probe, std::is_same_v<T, bf16> ? &stored_out : nullptr);
  const bool rho = attention_bf16_path() == AttentionBf16Path::kDpBf16;
  std::vector<double> lse_abs;
  for (double x : ref.lse) lse_abs.push_back(std::abs(x));
  Measured m;
  m.error.out = scaled_max_error(widened(run.out), ref.out);
  m.error.lse = scaled_max_error(widened(run.lse), ref.lse);
  m.error.dq = scaled_max_error(widened(run.dq), ref.dq);
  m.bound.out = bf16_bound(1, rho, ref.out, ref.out_terms, ref.out_terms);
  m.bound.lse = bf16_bound(0, false, ref.lse, lse_abs, lse_abs);
  m.bound.dq = bf16_bound(1, rho, ref.dq, ref.dq_terms, ref.dq_inputs);
  // dK and dV separately: their scales differ.
  const int ckv = cs.ckv();
  std::vector<double> gk, gv, rk, rv, tk, tv, ik;
  for (std::size_t i = 0; i < kv.size(); ++i) {
    const std::vector<double> got = widened(run.dkv[i]);
    for (std::size_t x = 0; x < got.size(); ++x) {
      const bool is_k = static_cast<int>(x % (2 * ckv)) < ckv;
      (is_k ? gk : gv).push_back(got[x] - initial);
      (is_k ? rk : rv).push_back(ref.dkv[i][x]);
      (is_k ? tk : tv).push_back(ref.dkv_terms[i][x]);
      if (is_k) ik.push_back(ref.dkv_inputs[i][x]);
    }
  }
  m.error.dk = scaled_max_error(gk, rk);
  m.error.dv = scaled_max_error(gv, rv);
  m.bound.dk = bf16_bound(0, rho, rk, tk, ik);
  m.bound.dv = bf16_bound(0, rho, rv, tv, tv);  // P >= 0: dv's inputs are its terms
  return m;
}

// fp32 against fp64: the tiles change only the order of fp32 sums (scores over d terms, the row
// sums and P v over at most e terms, dK/dV over g * s terms) and exp_fast's ~1e-7; for e of a
// few hundred that is a few 1e-6 of the output's scale at worst, 1e-6 typically.
constexpr double kFp32Tolerance = 5e-6;

void check_against_definition(const Case& cs, bool finite_differences = true) {
  const Inputs in = random_inputs(cs);
  const Errors f64 = errors_against_reference<double>(cs, in).error;
  EXPECT_LT(f64.out, 1e-12);
  EXPECT_LT(f64.lse, 1e-12);
  EXPECT_LT(f64.dq, 1e-12);
  EXPECT_LT(f64.dk, 1e-12);
  EXPECT_LT(f64.dv, 1e-12);
  if (finite_differences) {
    // The fp64 kernel's gradients against central differences of the definition's forward.
    Inputs x = in;
    const Run<double> run = run_kernel<double>(cs, x.q, x.kv, x.probe, 0.0);
    auto loss = [&] { return dot(x.probe, reference(cs, x.q, x.kv, nullptr).out); };
    EXPECT_LT(scaled_max_error(run.dq, numeric_gradient(loss, x.q)), kGradientTolerance);
    for (std::size_t i = 0; i < x.kv.size(); ++i) {
      EXPECT_LT(scaled_max_error(run.dkv[i], numeric_gradient(loss, x.kv[i])), kGradientTolerance)
          << "block " << i;
    }
  }
  const Errors f32 = errors_against_reference<float>(cs, in).error;
  EXPECT_LT(f32.out, kFp32Tolerance);
  EXPECT_LT(f32.lse, kFp32Tolerance);
  EXPECT_LT(f32.dq, kFp32Tolerance);
  EXPECT_LT(f32.dk, kFp32Tolerance);
  EXPECT_LT(f32.dv, kFp32Tolerance);
  const auto [b16, bound] = errors_against_reference<bf16>(cs, in);
  EXPECT_LE(b16.out, bound.out);
  EXPECT_LE(b16.lse, bound.lse);
  EXPECT_LE(b16.dq, bound.dq);
  EXPECT_LE(b16.dk, bound.dk);
  EXPECT_LE(b16.dv, bound.dv);
  std::printf("[ measured ] scaled errors fp32 out %.2g lse %.2g dq %.2g dk %.2g dv %.2g; bf16 "
              "(%s) out %.2g lse %.2g dq %.2g dk %.2g dv %.2g, of their bounds %.2f %.2f %.2f "
              "%.2f %.2f\n",
              f32.out, f32.lse, f32.dq, f32.dk, f32.dv,
              std::string(name_of(attention_bf16_path())).c_str(), b16.out, b16.lse, b16.dq,
              b16.dk, b16.dv, b16.out / bound.out, b16.lse / bound.lse, b16.dq / bound.dq,
              b16.dk / bound.dk, b16.dv / bound.dv);
}

TEST(Attention, WholeSequenceMatchesDefinitionAndFiniteDifferences) {
  check_against_definition({2, 2, 6, 7, {7}});
}

TEST(Attention, SegmentWithKVPrefixBlocksMatchesDefinitionAndFiniteDifferences) {
  // Queries are the last 4 of 10 positions; K/V come as blocks of 3, 1, 2 and the own 4.
  check_against_definition({2, 3, 6, 4, {3, 1, 2, 4}});
}

TEST(Attention, QueryTilesAcrossManyRowsMatchDefinitionAndFiniteDifferences) {
  // More query rows than a tile and more keys than a key tile, neither a multiple of its tile:
  // the causal skipping of key tiles and the masked diagonal tiles.
  check_against_definition({1, 1, 2, kAttentionQueryTile + 9, {5, kAttentionQueryTile + 9}});
}

TEST(Attention, LongPrefixBlocksAcrossKeyTilesMatchDefinition) {
  // e > s: a segment of 70 queries after blocks of 2 * kBk + 5 keys and 1 key, head dimension 24
  // (not a multiple of the tiles' padding), batch 2.
  check_against_definition({2, 2, 48, 70, {2 * kAttentionKeyTile + 5, 1, 70}}, false);
}

TEST(Attention, ThreadedPathMatchesDefinition) {
  // Big enough for the OpenMP path; the gradients are the same code as above, so no finite
  // differences here.
  check_against_definition(
      {2, 4, 64, 2 * kAttentionQueryTile + 3, {50, 2 * kAttentionQueryTile + 3}}, false);
}

// Grouped-query attention (kv_heads < heads).

TEST(Attention, GroupedQueriesWithKVPrefixMatchDefinitionAndFiniteDifferences) {
  // 4 query heads on 2 K/V heads; queries are the last 5 of 10 positions, K/V in blocks 3, 2, 5.
  check_against_definition({2, 4, 8, 5, {3, 2, 5}, 2});
}

TEST(Attention, MultiQueryMatchesDefinitionAndFiniteDifferences) {
  check_against_definition({1, 3, 6, 4, {2, 4}, 1});  // one K/V head for all queries
}

TEST(Attention, GroupedThreadedPathMatchesDefinition) {
  check_against_definition(
      {2, 8, 64, 2 * kAttentionQueryTile + 3, {50, 2 * kAttentionQueryTile + 3}, 2}, false);
}

// A block's K/V with each K/V head copied to the g query heads of its group (Hugging Face's
// repeat_kv): (B, length, 2 Ckv) -> (B, length, 2C).
std::vector<double> repeat_kv(const Case& cs, const std::vector<double>& kv, int length) {
  const int d = cs.d(), group = cs.heads / cs.kvh(), ckv = cs.ckv(), c = cs.c;
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

// GQA = multi-head attention on the repeated K/V (the forward bitwise: each query head's
// arithmetic is the same); a K/V head's gradient is the sum of its copies' gradients (the
// backward of repeat_kv).
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
  EXPECT_EQ(gqa.out, ref.out);
  EXPECT_EQ(gqa.lse, ref.lse);
  EXPECT_LT(scaled_max_error(gqa.dq, ref.dq), 1e-14);
  const int d = cs.d(), group = cs.heads / cs.kvh(), ckv = cs.ckv(), c = cs.c;
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
  check_against_repeated_kv(
      {1, 4, 8, kAttentionQueryTile + 5, {40, kAttentionQueryTile + 5}, 1});
}

TEST(Attention, GroupedThreadedEqualsMultiHeadOnRepeatedKV) {
  // Threaded (one (batch row, K/V head) per item backward), several query tiles, g = 4.
  check_against_repeated_kv(
      {2, 8, 128, 2 * kAttentionQueryTile + 3, {50, 2 * kAttentionQueryTile + 3}, 2});
}

// All 4 query heads share one K/V head, with head dimension 64: a backward that let threads
// accumulate into a shared dK/dV (or in an order set by the schedule) would differ from the
// one-thread result in its last bits, or lose updates. 8 runs, as a race shows by chance.
template <typename T>
void check_same_for_any_thread_count() {
  const Case cs{2, 4, 256, 2 * kAttentionQueryTile + 3, {50, 2 * kAttentionQueryTile + 3}, 1};
  const Inputs in = random_inputs(cs);
  const auto q = stored<T>(in.q), probe = stored<T>(in.probe);
  std::vector<std::vector<T>> kv;
  for (const auto& b : in.kv) kv.push_back(stored<T>(b));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run_kernel<T>(cs, q, kv, probe, 0.75);
  for (int run = 0; run < 8; ++run) {
    omp_set_num_threads(run % 2 == 0 ? 2 : std::max(threads, 4));
    const auto many = run_kernel<T>(cs, q, kv, probe, 0.75);
    EXPECT_EQ(widened(one.out), widened(many.out));
    EXPECT_EQ(one.lse, many.lse);
    EXPECT_EQ(widened(one.dq), widened(many.dq));
    for (std::size_t i = 0; i < kv.size(); ++i) {
      EXPECT_EQ(one.dkv[i], many.dkv[i]) << "block " << i << ", run " << run;
    }
  }
  omp_set_num_threads(threads);
}

TEST(Attention, Fp32IsTheSameForAnyThreadCount) { check_same_for_any_thread_count<float>(); }
TEST(Attention, Bf16IsTheSameForAnyThreadCount) { check_same_for_any_thread_count<bf16>(); }

// Which tile products the bf16 tests above ran (kernels/attention_path.h): vdpbf16ps wherever
// the build and the CPU have AVX-512 BF16, unless PLAIT_BF16_ATTENTION=widened forces the widened
// fp32 products, as the ctest entry Attention.Bf16Widened does (tests/kernels/CMakeLists.txt) so
// that both paths are tested on any machine.
bool widened_forced() {
  const char* value = std::getenv("PLAIT_BF16_ATTENTION");
  return value != nullptr && std::string(value) == "widened";
}

TEST(AttentionBf16Path, DpBf16RunsWhereTheCpuHasIt) {
  if (!attention_dpbf16_available()) {
    GTEST_SKIP() << "no AVX-512 BF16 in this build or CPU: the bf16 attention tests ran the "
                    "widened-fp32 products (" << describe_attention_bf16_path() << ")";
  }
  if (widened_forced()) GTEST_SKIP() << "PLAIT_BF16_ATTENTION=widened forces the other path";
  EXPECT_EQ(attention_bf16_path(), AttentionBf16Path::kDpBf16) << describe_attention_bf16_path();
}

TEST(AttentionBf16Path, WidenedWhenTheEnvironmentForcesIt) {
  if (!widened_forced()) {
    GTEST_SKIP() << "needs PLAIT_BF16_ATTENTION=widened in the environment: ctest runs it as "
                    "Attention.Bf16Widened (tests/kernels/CMakeLists.txt)";
  }
  EXPECT_EQ(attention_bf16_path(), AttentionBf16Path::kWidenedFp32);
  if (attention_dpbf16_available()) {
    EXPECT_EQ(describe_attention_bf16_path(), "attention widened-fp32 (PLAIT_BF16_ATTENTION=widened)");
  }
}

TEST(Attention, RejectsKVHeadsNotDividingHeads) {
  // 4 heads of 2 on 8 columns; K/V rows as for 3 K/V heads.
  std::vector<float> q(24), kv(3 * 2 * 6), out(24), lse(4 * 3), dkv(kv.size());
  const std::vector<KVBlock<float>> blocks = {{kv.data(), dkv.data(), 3}};
  std::vector<float> workspace(attention_backward_workspace(2, omp_get_max_threads()));
  for (int kv_heads : {3, 0, 8}) {
    EXPECT_THROW(
        attention_forward<float>(out.data(), lse.data(), q.data(), blocks, 1, 3, 8, 4, kv_heads),
        Error)
        << kv_heads;
    EXPECT_THROW(attention_backward<float>(q.data(), blocks, out.data(), q.data(), out.data(),
                                           lse.data(), 1, 3, 8, 4, kv_heads, workspace.data()),
                 Error)
        << kv_heads;
  }
}

}  // namespace
}  // namespace plait::kernels
