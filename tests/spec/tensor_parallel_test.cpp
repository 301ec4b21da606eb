// The tensor-parallel model of spec/ (tensor_parallel_plan.h): its refusals, the vocabulary
// padding, the ring collectives by hand, and the per-rank activations (1/t under sequence
// parallelism).
#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/spec/attention_tiles.h"
#include "plait/spec/precision_policy.h"
#include "plait/spec/tensor_parallel_plan.h"
#include "plait/spec/unit_memory.h"

namespace plait::spec {
namespace {

ModelSpec gqa_llama() {
  ModelSpec m = gpt2_model(2, 64, 8, 1000, 256, false);
  m.family = Family::llama;
  m.kv_heads = 2;
  m.ffn_hidden = 96;
  return m;
}

TEST(TensorParallel, RefusesKvHeadsThatDoNotSplit) {
  const ModelSpec m = gqa_llama();
  EXPECT_NO_THROW(check_tensor_parallel(m, 2));
  try {
    check_tensor_parallel(m, 4);
    FAIL() << "kv_heads 2 split over 4 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_heads 2 is not divisible by the tensor-parallel size 4"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_tensor_parallel(gpt2_model(2, 48, 3, 100, 64), 2), Error);  // heads
  EXPECT_THROW(check_tensor_parallel(m, 0), Error);
}

// Megatron pads the vocabulary to a multiple of 128 t; t = 1 keeps it (the single process).
TEST(TensorParallel, PadsTheVocabularyToAMultipleOf128T) {
  ModelSpec m = gpt2_model(2, 64, 8, 50257, 256);
  EXPECT_EQ(padded_vocab(m, 1), 50257);
  EXPECT_EQ(padded_vocab(m, 2), 50432);  // 197 x 256
  EXPECT_EQ(padded_vocab(m, 8), 51200);  // 50 x 1024
  m.vocab = 32000;
  EXPECT_EQ(padded_vocab(m, 4), 32256);  // 63 x 512
  EXPECT_EQ(padded_vocab(m, 2), 32000);
}

TEST(TensorParallel, SegmentsMustSplitOverTheGroup) {
  EXPECT_NO_THROW(check_sequence_parallel({24, 16, 8}, 8));
  EXPECT_NO_THROW(check_sequence_parallel({7}, 1));
  EXPECT_THROW(check_sequence_parallel({24, 12, 12}, 8), Error);
}

// Rings by hand: t = 4, 8 us per step, 100 GB/s, 400 MB: all-gather 3 x 8 us + 3/4 x 4 ms.
TEST(TensorParallel, RingCollectivesByHand) {
  EXPECT_DOUBLE_EQ(ring_collective_seconds(Collective::all_gather, 4e8, 4, 8e-6, 100e9), 24e-6 + 3e-3);
  EXPECT_DOUBLE_EQ(ring_collective_seconds(Collective::reduce_scatter, 4e8, 4, 8e-6, 100e9), 24e-6 + 3e-3);
  EXPECT_DOUBLE_EQ(ring_collective_seconds(Collective::all_reduce, 4e8, 4, 8e-6, 100e9), 2 * (24e-6 + 3e-3));
  EXPECT_EQ(ring_collective_seconds(Collective::all_gather, 4e8, 1, 8e-6, 100e9), 0.0);
  // A unit's collectives: two layers, F = 4 gathers of tokens x C x 2 bytes (bf16 activations)
  // and 4 reduce-scatters of tokens x C x 4 bytes (fp32 partial sums).
  const TpCollectives f = tp_collectives(UnitPass::forward, 2, false, false);
  EXPECT_EQ(f.all_gathers, 4);
  EXPECT_EQ(f.reduce_scatters, 4);
  // W gathers again: two inputs of column-parallel linears, two output gradients of row-parallel ones.
  EXPECT_EQ(tp_collectives(UnitPass::backward_weight, 2, false, false).all_gathers, 8);
  EXPECT_EQ(tp_collectives(UnitPass::backward_weight, 2, false, false).reduce_scatters, 0);
  const double gather = 7 * 5e-6 + 7.0 / 8 * (4096.0 * 1024 * 2) / 200e9;
  const double scatter = 7 * 5e-6 + 7.0 / 8 * (4096.0 * 1024 * 4) / 200e9;
  EXPECT_DOUBLE_EQ(tp_collective_seconds(f, 4096, 1024, 2, 8, 5e-6, 200e9), 4 * gather + 4 * scatter);
  // The head adds its gather and the cross-entropy's three all-reduces of one fp32 per token.
  const TpCollectives h = tp_collectives(UnitPass::forward, 0, false, true);
  EXPECT_EQ(h.all_gathers, 1);
  EXPECT_EQ(h.all_reduces, 3);
}

// Every activation of a layer is 1/t per rank under sequence parallelism (Korthikanti et al.):
// the table's every field, for both families; the head's logits are the padded vocabulary's 1/t.
TEST(TensorParallel, ActivationsAreOneTthPerRank) {
  for (const ModelSpec& m : {gpt2_model(2, 64, 8, 1000, 256), gqa_llama()}) {
    for (Precision p : {Precision::bf16, Precision::fp32}) {
      const UnitMemory one = unit_memory(m, {2, false, false}, 2, {1, 32, 32}, p, 1);
      const UnitMemory two = unit_memory(m, {2, false, false, 0, 2}, 2, {1, 32, 32}, p, 1);
      EXPECT_EQ(two.forward_activations * 2, one.forward_activations);
      EXPECT_EQ(two.forward_kv * 2, one.forward_kv);
      EXPECT_EQ(two.dkv * 2, one.dkv);
      EXPECT_EQ(two.backward_kept * 2, one.backward_kept);
      EXPECT_EQ(two.backward_freed * 2, one.backward_freed);
      // B's peak holds the CPU attention backward's tile scratch, per thread and not per head,
      // so it is not divided (spec/attention_tiles.h); the rest of the peak is.
      const auto scratch = static_cast<std::size_t>(attention_workspace_elements(m.head_dim(), 1)) * 4;
      EXPECT_EQ((two.backward_peak - scratch) * 2, one.backward_peak - scratch);
      EXPECT_EQ(one.communication, 0u);
      EXPECT_EQ(two.communication, std::size_t{64} * 64 * 4);  // N x C fp32 partial sums, both precisions
    }
    // The head: N x V'/t logits (bf16 under the policy table: spec/precision_policy.h),
    // V' = 1024 at t = 2 (1000 padded to 256 t); the rest of the head's state is 1/t.
    const auto logit = static_cast<std::size_t>(bytes_of(TensorClass::logits, Precision::bf16));
    const UnitMemory head1 = unit_memory(m, {0, false, true}, 2, {1, 32, 32}, Precision::bf16, 1);
    const UnitMemory head2 = unit_memory(m, {0, false, true, 0, 2}, 2, {1, 32, 32}, Precision::bf16, 1);
    ASSERT_GT(head1.forward_activations, 64 * 1000 * logit);
    EXPECT_EQ(head1.forward_activations - 64 * 1000 * logit, 2 * (head2.forward_activations - 64 * 512 * logit));
  }
  EXPECT_THROW(unit_memory(gqa_llama(), {1, false, false, 0, 2}, 1, {0, 0, 31}, Precision::bf16, 1), Error);
}

}  // namespace
}  // namespace plait::spec
