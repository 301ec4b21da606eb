#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

#include "plait/core/error.h"
#include "plait/spec/sequence_partition.h"

namespace plait::spec {
namespace {

const ModelSpec k7B = gpt2_model(32, 4096, 32, 50257, 32768);  // Seq1F1B's 7B shape

std::int64_t total(const SequencePartition& p) {
  return std::accumulate(p.lengths.begin(), p.lengths.end(), std::int64_t{0});
}

// The formula of seq1f1b.md, term by term, on a shape small enough to do by hand:
// L=1, H=4, n_h=2 (d=2), V=10, F=16; segment [0, 4): 4*4*4*10 + 8*4*4*4 + 4*4*4*16 + 11*2*(16-8).
TEST(SequencePartition, SegmentFlopsFollowTheFormula) {
  const ModelSpec tiny = gpt2_model(1, 4, 2, 10, 8);
  EXPECT_DOUBLE_EQ(tiny.segment_forward_flops(0, 4), 640 + 512 + 1024 + 176);
  // Same length later in the sequence: only the attention term grows, by 11*2*4*4 = 352.
  EXPECT_DOUBLE_EQ(tiny.segment_forward_flops(4, 4), 640 + 512 + 1024 + 176 + 352);
  EXPECT_DOUBLE_EQ(tiny.layer_attention_flops(4, 4), 11.0 * 2 * (4 * 8 - 8));
}

// Acceptance: 7B at 32k tokens, k = 4: the computation-wise split equalises forward FLOPs within
// 0.5%; the even split's last segment costs about 1.8x its first (seq1f1b.md).
TEST(SequencePartition, FlopsSplitEqualisesTheSevenBillionShape) {
  const SequencePartition even = even_partition(k7B, 32768, 4);
  const SequencePartition flops = flops_partition(k7B, 32768, 4);
  EXPECT_EQ(total(flops), 32768);
  EXPECT_LT(flops.flops_imbalance(), 0.005);
  EXPECT_GT(flops.lengths[0], flops.lengths[1]);
  EXPECT_GT(flops.lengths[1], flops.lengths[2]);
  EXPECT_GT(flops.lengths[2], flops.lengths[3]);
  const double even_ratio = even.flops[3] / even.flops[0];
  EXPECT_NEAR(even_ratio, 1.8, 0.05);
  // At 128k the reference quotes about 3.3x.
  const SequencePartition even128 = even_partition(k7B, 131072, 4);
  EXPECT_NEAR(even128.flops[3] / even128.flops[0], 3.3, 0.05);
  EXPECT_LT(flops_partition(k7B, 131072, 4).flops_imbalance(), 0.005);
}

TEST(SequencePartition, RoundingKeepsMultiplesAndSpreadsTheError) {
  const SequencePartition p = flops_partition(k7B, 32768, 4, 128);
  EXPECT_EQ(total(p), 32768);
  for (std::int64_t len : p.lengths) EXPECT_EQ(len % 128, 0);
  // One 128-token step of a ~6k-token segment is about 2%; spreading keeps it near half that.
  EXPECT_LT(p.flops_imbalance(), 0.015);
  const SequencePartition odd = flops_partition(k7B, 1000, 3, 64);
  EXPECT_EQ(total(odd), 1000);
  EXPECT_EQ(odd.lengths[1] % 64, 0);
  EXPECT_EQ(odd.lengths[2] % 64, 0);
}

TEST(SequencePartition, EvenSplitAndEdgeCases) {
  const SequencePartition e = even_partition(k7B, 10, 4);
  EXPECT_EQ(e.lengths, (std::vector<std::int64_t>{4, 2, 2, 2}));
  EXPECT_EQ(e.start(2), 6);  // the runtime's cut: remainder on the first segment
  EXPECT_EQ(flops_partition(k7B, 4096, 1).lengths, (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(flops_partition(k7B, 4, 4).lengths, (std::vector<std::int64_t>{1, 1, 1, 1}));
  EXPECT_THROW(even_partition(k7B, 3, 4), Error);
  EXPECT_THROW(flops_partition(k7B, 300, 4, 128), Error);
  EXPECT_EQ(parse_split_method("even"), SplitMethod::even);
  EXPECT_THROW(parse_split_method("uneven"), Error);
}

// The one value: starts follow the lengths, FLOPs are the model's per segment, and the request a
// config makes is cut once by cut_sequence (explicit lengths are taken as they are).
TEST(SequencePartition, CutSequenceIsTheOnePlaceARequestBecomesAPartition) {
  const ModelSpec m = gpt2_model(2, 64, 4, 256, 128);
  SegmentRequest r;
  r.count = 3;
  const SequencePartition even = cut_sequence(m, 100, r);
  EXPECT_EQ(even.lengths, (std::vector<std::int64_t>{34, 33, 33}));
  EXPECT_EQ(even.starts, (std::vector<std::int64_t>{0, 34, 67}));
  EXPECT_EQ(even.seq(), 100);
  EXPECT_DOUBLE_EQ(even.flops[2], m.segment_forward_flops(67, 33));
  EXPECT_EQ(even.segment(2), (Segment{2, 67, 33}));
  r.split = SplitMethod::flops;
  const SequencePartition flops = cut_sequence(m, 100, r);
  EXPECT_EQ(flops, flops_partition(m, 100, 3));
  EXPECT_EQ(flops.split, SplitMethod::flops);
  r.lengths = {50, 25, 25};
  EXPECT_EQ(cut_sequence(m, 100, r).lengths, r.lengths);
  EXPECT_THROW(cut_sequence(m, 99, r), Error);
}

// A LLaMA shape cuts by its own FLOPs (SwiGLU's three matrices, grouped K/V): the flops split
// equalises them, and differs from the GPT cut of the same sizes.
TEST(SequencePartition, LlamaCutsByItsOwnFlops) {
  ModelSpec llama = gpt2_model(22, 2048, 32, 32000, 8192, false);
  llama.family = Family::llama;
  llama.kv_heads = 4;
  llama.ffn_hidden = 5632;
  const SequencePartition p = flops_partition(llama, 8192, 4);
  EXPECT_LT(p.flops_imbalance(), 0.005);
  EXPECT_NE(p.lengths, flops_partition(gpt2_model(22, 2048, 32, 32000, 8192), 8192, 4).lengths);
}

}  // namespace
}  // namespace plait::spec
