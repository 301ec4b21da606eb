// The input embedding in bf16: the forward from bf16 tables (out = bf16(fp32(wte) + fp32(wpe)),
// one rounding), the backward accumulating the bf16 dout into fp32 tables. Against the fp64
// kernel on the bf16-rounded inputs (bounds: bf16_test_support.h) and bitwise against the fp32
// kernel on the widened inputs (the same fp32 additions in the same order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16_test_support.h"
#include "finite_difference.h"
#include "plait/kernels/embedding.h"

namespace plait::kernels {
namespace {

using namespace plait::kernels::testing;

// The threaded path (B * s * C >= 2^15), C no multiple of the kernel's column block of 64, a
// small vocabulary so that tokens repeat (colliding gradient rows), a segment at pos0 = 5.
constexpr int kBatch = 3, kSeq = 29, kC = 397, kVocab = 17, kPos0 = 5, kMaxSeq = kPos0 + kSeq;

std::vector<std::int32_t> tokens() {
  std::vector<std::int32_t> t(kBatch * kSeq);
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<std::int32_t>((i * 7 + i / 5) % kVocab);
  }
  return t;
}

TEST(EmbeddingBf16, ForwardIsOneRoundingOfTheFp32SumOrAnExactCopy) {
  const auto tok = tokens();
  const auto wte = bf16_values(random_vector(kVocab * kC, 41)),
             wpe = bf16_values(random_vector(kMaxSeq * kC, 42, 0.1));
  const auto wteb = round_to_bf16(wte), wpeb = round_to_bf16(wpe);
  const std::size_t n = static_cast<std::size_t>(kBatch) * kSeq * kC;
  std::vector<bf16> out(n), copy(n);
  embedding_forward(out.data(), tok.data(), wteb.data(), wpeb.data(), kBatch, kSeq, kC, kPos0,
                    kVocab);
  embedding_forward<bf16>(copy.data(), tok.data(), wteb.data(), nullptr, kBatch, kSeq, kC, kPos0,
                          kVocab);
  std::vector<double> ref(n), ref_copy(n);
  embedding_forward(ref.data(), tok.data(), wte.data(), wpe.data(), kBatch, kSeq, kC, kPos0,
                    kVocab);
  embedding_forward<double>(ref_copy.data(), tok.data(), wte.data(), nullptr, kBatch, kSeq, kC,
                            kPos0, kVocab);
  // One fp32 addition of two exact values (e = nu |ref|), then the rounding; without positions
  // the row is copied, so bit for bit the table's.
  std::vector<double> bound(n);
  for (std::size_t i = 0; i < n; ++i) bound[i] = bf16_output_bound(ref[i], kNu * std::abs(ref[i]));
  expect_within("embedding bf16 forward", widen(out), ref, bound);
  expect_within("embedding bf16 forward without positions", widen(copy), ref_copy,
                std::vector<double>(n, 0.0));
  const auto wtef = to_float(wte), wpef = to_float(wpe);
  std::vector<float> outf(n);
  embedding_forward(outf.data(), tok.data(), wtef.data(), wpef.data(), kBatch, kSeq, kC, kPos0,
                    kVocab);
  expect_bitwise("embedding bf16 forward = bf16(fp32 kernel)", out, round_to_bf16(outf));
}

TEST(EmbeddingBf16, BackwardAccumulatesTheBf16GradientInFp32) {
  const auto tok = tokens();
  const std::size_t n = static_cast<std::size_t>(kBatch) * kSeq * kC;
  const auto dout = bf16_values(random_vector(n, 43));
  const auto doutb = round_to_bf16(dout);
  // Accumulated into what the tables hold.
  const auto dwte0 = to_float(random_vector(kVocab * kC, 44)),
             dwpe0 = to_float(random_vector(kMaxSeq * kC, 45));
  auto dwte = dwte0, dwpe = dwpe0;
  embedding_backward(dwte.data(), dwpe.data(), doutb.data(), tok.data(), kBatch, kSeq, kC, kPos0);
  auto dwtef = dwte0, dwpef = dwpe0;
  const auto doutf = to_float(dout);
  embedding_backward(dwtef.data(), dwpef.data(), doutf.data(), tok.data(), kBatch, kSeq, kC,
                     kPos0);
  expect_bitwise("embedding bf16 dwte vs fp32 kernel", dwte, dwtef);
  expect_bitwise("embedding bf16 dwpe vs fp32 kernel", dwpe, dwpef);

  auto rte = to_double(dwte0), rpe = to_double(dwpe0);
  embedding_backward(rte.data(), rpe.data(), dout.data(), tok.data(), kBatch, kSeq, kC, kPos0);
  // Each gradient element is the initial value plus k exact terms added in fp32 one at a time:
  // at most k nu times the running sums, <= k nu (|initial| + sum |terms|).
  std::vector<double> ste(rte.size()), spe(rpe.size()), kte(rte.size(), 0), kpe(rpe.size(), 0);
  for (std::size_t i = 0; i < ste.size(); ++i) ste[i] = std::abs(dwte0[i]);
  for (std::size_t i = 0; i < spe.size(); ++i) spe[i] = std::abs(dwpe0[i]);
  for (int r = 0; r < kBatch * kSeq; ++r) {
    for (int j = 0; j < kC; ++j) {
      const double g = std::abs(dout[static_cast<std::size_t>(r) * kC + j]);
      const std::size_t te = static_cast<std::size_t>(tok[r]) * kC + j;
      const std::size_t pe = static_cast<std::size_t>(kPos0 + r % kSeq) * kC + j;
      ste[te] += g;
      kte[te] += 1;
      spe[pe] += g;
      kpe[pe] += 1;
    }
  }
  for (std::size_t i = 0; i < ste.size(); ++i) ste[i] *= kte[i] * kNu;
  for (std::size_t i = 0; i < spe.size(); ++i) spe[i] *= kpe[i] * kNu;
  expect_within("embedding bf16 dwte (fp32)", to_double(dwte), rte, ste);
  expect_within("embedding bf16 dwpe (fp32)", to_double(dwpe), rpe, spe);
}

}  // namespace
}  // namespace plait::kernels
