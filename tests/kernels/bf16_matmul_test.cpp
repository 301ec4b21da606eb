// The bf16 GEMMs (bf16_matmul.h) against an fp64 reference on the same bf16 inputs, on both paths
// (oneDNN where the CPU has native bf16, skipped with a message elsewhere; the widened-sgemm
// fallback, forced, everywhere), with the bound derived in bf16_test_support.h.
#include "plait/kernels/bf16_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bf16_gemm_test_support.h"
#include "plait/core/error.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

struct Dims {
  int n, c, oc;
};
// Non-multiples of 16, one row, and each dimension past the fallback's 1024-wide tiles (rows,
// columns, reduction depth) and past oneDNN's K blocking.
const std::vector<Dims> kDims = {{1, 7, 5},    {5, 7, 4},     {17, 33, 15}, {64, 96, 48},
                                 {37, 1100, 53}, {1100, 40, 20}, {20, 40, 1100}};

std::string label(const Dims& d) {
  return "n=" + std::to_string(d.n) + " c=" + std::to_string(d.c) + " oc=" + std::to_string(d.oc);
}

class Bf16Matmul : public ::testing::TestWithParam<bool> {  // the parameter: forced fallback
 protected:
  bool fallback() const { return GetParam(); }
};

TEST_P(Bf16Matmul, ForwardMatchesFp64ReferenceWithinTheBound) {
  PathContext p(fallback());
  PLAIT_SKIP_UNLESS_PATH(*p.context, fallback());
  for (const Dims& d : kDims) {
    const auto inp = random_bf16(static_cast<std::size_t>(d.n) * d.c, 1);
    const auto w = random_bf16(static_cast<std::size_t>(d.oc) * d.c, 2);
    const auto b = random_bf16(d.oc, 3);
    const auto r = random_bf16(static_cast<std::size_t>(d.n) * d.oc, 4);
    for (const bool with_bias : {false, true}) {
      for (const bool with_residual : {false, true}) {
        SCOPED_TRACE(label(d) + (with_bias ? " bias" : "") + (with_residual ? " residual" : ""));
        std::vector<bf16> out(static_cast<std::size_t>(d.n) * d.oc);
        matmul_forward_bf16(*p.context, out.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr,
                            with_residual ? r.data() : nullptr, d.n, d.c, d.oc);
        BoundCheck check;
        for (int i = 0; i < d.n; ++i) {
          for (int o = 0; o < d.oc; ++o) {
            Reference ref;
            for (int j = 0; j < d.c; ++j) {
              ref.add(double(to_float(inp[i * d.c + j])) * to_float(w[o * d.c + j]));
            }
            if (with_bias) ref.add(to_float(b[o]));
            if (with_residual) ref.add(to_float(r[i * d.oc + o]));
            check("out", i, o, to_float(out[i * d.oc + o]), ref.sum, ref.bound_bf16());
          }
        }
        EXPECT_EQ(check.bad, 0);
      }
    }
  }
}

TEST_P(Bf16Matmul, BackwardInputMatchesFp64ReferenceWithinTheBound) {
  PathContext p(fallback());
  PLAIT_SKIP_UNLESS_PATH(*p.context, fallback());
  for (const Dims& d : kDims) {
    const auto dout = random_bf16(static_cast<std::size_t>(d.n) * d.oc, 5);
    const auto w = random_bf16(static_cast<std::size_t>(d.oc) * d.c, 6);
    const auto old = random_bf16(static_cast<std::size_t>(d.n) * d.c, 7);
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE(label(d) + (accumulate ? " accumulate" : ""));
      std::vector<bf16> dinp = old;
      matmul_backward_input_bf16(*p.context, dinp.data(), dout.data(), w.data(), d.n, d.c, d.oc,
                                 accumulate);
      BoundCheck check;
      for (int i = 0; i < d.n; ++i) {
        for (int j = 0; j < d.c; ++j) {
          Reference ref;
          for (int o = 0; o < d.oc; ++o) {
            ref.add(double(to_float(dout[i * d.oc + o])) * to_float(w[o * d.c + j]));
          }
          if (accumulate) ref.add(to_float(old[i * d.c + j]));
          check("dinp", i, j, to_float(dinp[i * d.c + j]), ref.sum, ref.bound_bf16());
        }
      }
      EXPECT_EQ(check.bad, 0);
    }
  }
}

TEST_P(Bf16Matmul, BackwardWeightAccumulatesInFp32WithinTheBound) {
  PathContext p(fallback());
  PLAIT_SKIP_UNLESS_PATH(*p.context, fallback());
  for (const Dims& d : kDims) {
    const auto dout = random_bf16(static_cast<std::size_t>(d.n) * d.oc, 8);
    const auto inp = random_bf16(static_cast<std::size_t>(d.n) * d.c, 9);
    const std::vector<double> old_w = random_vector(static_cast<std::size_t>(d.oc) * d.c, 10);
    const std::vector<double> old_b = random_vector(d.oc, 11);
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE(label(d) + (with_bias ? " dbias" : ""));
      std::vector<float> dw = to_float(old_w), db = to_float(old_b);
      matmul_backward_weight_bf16(*p.context, dw.data(), with_bias ? db.data() : nullptr, dout.data(),
                                  inp.data(), d.n, d.c, d.oc);
      BoundCheck check;
      for (int o = 0; o < d.oc; ++o) {
        for (int j = 0; j < d.c; ++j) {
          Reference ref;
          ref.add(static_cast<float>(old_w[o * d.c + j]));
          for (int i = 0; i < d.n; ++i) {
            ref.add(double(to_float(dout[i * d.oc + o])) * to_float(inp[i * d.c + j]));
          }
          check("dweight", o, j, dw[o * d.c + j], ref.sum, ref.bound_fp32());
        }
        Reference bias_ref;
        bias_ref.add(static_cast<float>(old_b[o]));
        for (int i = 0; i < d.n; ++i) bias_ref.add(to_float(dout[i * d.oc + o]));
        if (with_bias) {
          EXPECT_LE(std::fabs(db[o] - bias_ref.sum), bias_ref.bound_fp32()) << "dbias[" << o << "]";
        } else {
          EXPECT_EQ(db[o], static_cast<float>(old_b[o])) << "dbias untouched when null";
        }
      }
      EXPECT_EQ(check.bad, 0);
    }
  }
}

// Bias, residual and the accumulated old value join the fp32 sum before the one rounding. With
// inp . w = 1 + 2^-9 (exact in fp32) and 2^-8 added, one rounding gives bf16(1 + 3·2^-9) =
// 1 + 2^-7; rounding the product first would give bf16(1 + 2^-9) + 2^-8 = 1 + 2^-8, a tie that
// rounds to even, 1.
TEST_P(Bf16Matmul, AdditionsAreRoundedOnceWithTheProducts) {
  PathContext p(fallback());
  PLAIT_SKIP_UNLESS_PATH(*p.context, fallback());
  const float once = 1.0f + std::ldexp(1.0f, -7);
  const std::vector<bf16> x = {bf16(1.0f), bf16(std::ldexp(1.0f, -9))}, ones = {bf16(1.0f), bf16(1.0f)};
  const std::vector<bf16> half_ulp = {bf16(std::ldexp(1.0f, -8))};
  bf16 out;
  matmul_forward_bf16(*p.context, &out, x.data(), ones.data(), half_ulp.data(), nullptr, 1, 2, 1);
  EXPECT_EQ(to_float(out), once) << "bias";
  matmul_forward_bf16(*p.context, &out, x.data(), ones.data(), nullptr, half_ulp.data(), 1, 2, 1);
  EXPECT_EQ(to_float(out), once) << "residual";
  // dinp (1,1) += dout (1,2) @ weight (2,1).
  bf16 dinp = half_ulp[0];
  matmul_backward_input_bf16(*p.context, &dinp, x.data(), ones.data(), 1, 1, 2, true);
  EXPECT_EQ(to_float(dinp), once) << "accumulate";
}

TEST_P(Bf16Matmul, EmptyResultsAreNoOpsAndBadSizesAreErrors) {
  PathContext p(fallback());
  PLAIT_SKIP_UNLESS_PATH(*p.context, fallback());
  std::vector<float> dw(4, 1.0f), db(2, 2.0f);
  const std::vector<bf16> x(4, bf16(1.0f));
  matmul_backward_weight_bf16(*p.context, dw.data(), db.data(), x.data(), x.data(), 0, 2, 2);
  EXPECT_EQ(dw[0], 1.0f);
  EXPECT_EQ(db[1], 2.0f);
  matmul_forward_bf16(*p.context, nullptr, x.data(), x.data(), nullptr, nullptr, 0, 2, 2);
  std::vector<bf16> out(2);
  EXPECT_THROW(matmul_forward_bf16(*p.context, out.data(), x.data(), x.data(), nullptr, nullptr, 1, 0, 2),
               Error);
  EXPECT_THROW(matmul_forward_bf16(*p.context, out.data(), x.data(), x.data(), nullptr, nullptr, -1, 2, 2),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Matmul, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "WidenedSgemm" : "OneDnn";
                         });

}  // namespace
}  // namespace plait::kernels
