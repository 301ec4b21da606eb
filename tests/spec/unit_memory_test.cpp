// The unit memory table by hand for one layer of each family and precision (the fp32 engine's
// bytes are pinned against the tracker in tests/model/memory_test.cpp).
#include <gtest/gtest.h>

#include "plait/spec/unit_memory.h"

namespace plait::spec {
namespace {

// One GPT-2 layer, batch 2, segment [4, 8) (N = 8 rows, e = 8 keys), C = 16, H = 2, F = 64; the
// attention state is its log-sum-exp, P = N * H values (spec/attention_tiles.h).
TEST(UnitMemory, Fp32GptLayerFollowsTheEngineTable) {
  const ModelSpec m = gpt2_model(1, 16, 2, 50, 32);
  const UnitMemory u = unit_memory(m, {1, false, false}, 2, {1, 4, 4}, Precision::fp32, 1);
  const std::size_t N = 8, C = 16, P = N * 2;
  EXPECT_EQ(u.forward_activations, 4 * (14 * N * C + 4 * N + P));
  EXPECT_EQ(u.forward_kv, 4 * 2 * N * C);
  EXPECT_EQ(u.dkv, 4 * 2 * N * C);
  EXPECT_EQ(u.backward_freed, 4 * (5 * N * C + P));
  EXPECT_EQ(u.backward_kept, 4 * 9 * N * C);
}

// The same layer recomputed: F keeps only x_in (its peak is the whole forward, before the layer
// frees its state), B rebuilds the rest and keeps what W needs, so after B the unit holds what
// it holds without recomputation.
TEST(UnitMemory, RecomputedGptLayerKeepsItsInputAndItsKV) {
  const ModelSpec m = gpt2_model(1, 16, 2, 50, 32);
  const UnitMemory plain = unit_memory(m, {1, false, false}, 2, {1, 4, 4}, Precision::fp32, 1);
  const UnitMemory u = unit_memory(m, {1, false, false, 1}, 2, {1, 4, 4}, Precision::fp32, 1);
  const std::size_t N = 8, C = 16, P = N * 2;
  EXPECT_EQ(u.forward_activations, 4 * N * C);
  EXPECT_EQ(u.forward_kv, plain.forward_kv);
  EXPECT_EQ(u.forward_peak, plain.forward_activations + plain.forward_kv);
  EXPECT_EQ(u.recompute_layer, 4 * (13 * N * C + 4 * N + P));  // all but x_in
  EXPECT_EQ(u.backward_freed, 0u);
  EXPECT_EQ(u.backward_kept, 4 * (9 * N * C + 8 * N * C + 4 * N));
  EXPECT_EQ(u.activations_after_b(), plain.activations_after_b());
  // B's peak: the rebuilt layer on top of what the plain B peaks at, less nothing (the plain
  // unit held the same state from its F).
  EXPECT_EQ(u.backward_peak, plain.backward_peak + u.recompute_layer);
  EXPECT_EQ(u.fused_peak, plain.fused_peak + u.recompute_layer);
}

// One LLaMA layer, C = 16, 4 heads of 4 with 2 kv heads (K = 8), F = 24, N = 8: fp32 keeps
// 5C + F + 2 stats to W, frees q + gate|up (C + 2F) + the log-sum-exp (N * H) at B.
TEST(UnitMemory, LlamaLayerInBothPrecisions) {
  ModelSpec m = gpt2_model(1, 16, 4, 50, 32, false);
  m.family = Family::llama;
  m.kv_heads = 2;
  m.ffn_hidden = 24;
  const std::size_t N = 8, C = 16, K = 8, F = 24, P = N * 4;
  const UnitMemory f = unit_memory(m, {1, false, false}, 2, {1, 4, 4}, Precision::fp32, 1);
  EXPECT_EQ(f.forward_activations, 4 * (N * (5 * C + F) + 2 * N + N * (C + 2 * F) + P));
  EXPECT_EQ(f.forward_kv, 4 * 2 * N * K);
  EXPECT_EQ(f.backward_kept, 4 * N * (5 * C + 2 * F));
  // bf16: 2-byte activations and K/V, 4-byte statistics and log-sum-exp, fp32 dK/dV
  // accumulators.
  const UnitMemory b = unit_memory(m, {1, false, false}, 2, {1, 4, 4}, Precision::bf16, 1);
  EXPECT_EQ(b.forward_activations, 2 * N * (5 * C + F) + 4 * 2 * N + 2 * N * (C + 2 * F) + 4 * N * 4);
  EXPECT_EQ(b.forward_kv, 2 * 2 * N * K);
  EXPECT_EQ(b.dkv, 4 * 2 * N * K);
  EXPECT_EQ(b.backward_kept, 2 * N * (5 * C + 2 * F));
}

// Attention without the S x S matrix: a unit's bytes do not depend on how many keys precede its
// segment, and its backward's scratch is the attention kernel's tiles, one set per thread.
TEST(UnitMemory, AttentionStateAndScratchDoNotGrowWithThePrefix) {
  const ModelSpec m = gpt2_model(2, 64, 4, 50, 20000);
  const UnitMemory first = unit_memory(m, {2, false, false}, 2, {0, 0, 64}, Precision::fp32, 2);
  const UnitMemory late =
      unit_memory(m, {2, false, false}, 2, {5, 16000, 64}, Precision::fp32, 2);
  EXPECT_EQ(first.forward_activations, late.forward_activations);
  EXPECT_EQ(first.backward_peak, late.backward_peak);
  EXPECT_EQ(first.fused_peak, late.fused_peak);
  // Two threads' tiles more than one thread's, per layer B (the scratch lives inside one B).
  const UnitMemory one = unit_memory(m, {2, false, false}, 2, {0, 0, 64}, Precision::fp32, 1);
  EXPECT_EQ(first.backward_peak - one.backward_peak,
            4 * attention_backward_tile_elements(m.head_dim()));
}

// The head stage's logits dominate it; the embedding stage keeps its token ids.
TEST(UnitMemory, HeadAndEmbeddingParts) {
  const ModelSpec m = gpt2_model(1, 16, 2, 50, 32);
  const UnitMemory head = unit_memory(m, {0, false, true}, 1, {0, 0, 4}, Precision::fp32, 1);
  EXPECT_EQ(head.forward_activations, 4 * (2 * 4 * 16 + 2 * 4 + 4 * 50));
  EXPECT_EQ(head.forward_peak, head.forward_activations + 4 * 4);
  const UnitMemory emb = unit_memory(m, {0, true, false}, 1, {0, 0, 4}, Precision::fp32, 1);
  EXPECT_EQ(emb.forward_activations, 4 * 4);
  EXPECT_EQ(parameter_bytes(Precision::bf16).total(), 18);
  EXPECT_EQ(parameter_bytes(Precision::fp32).total(), 16);
}

}  // namespace
}  // namespace plait::spec
