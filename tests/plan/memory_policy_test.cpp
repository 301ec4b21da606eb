#include <gtest/gtest.h>

#include "plait/plan/memory_policy.h"
#include "plait/runtime/engine_memory_coefficients.h"

namespace plait::plan {
namespace {

// The fp32 policy is plait's CPU engine: its coefficients agree with what the runtime derives
// from the engine's exact unit sizes (model/unit_memory.h), within the few bytes per token the
// policy rounds away.
TEST(MemoryPolicy, Fp32MatchesTheEngine) {
  const model::GPTConfig config{8, 128, 4, 256, 256, true};
  const sim::MemoryCoefficients engine = runtime::engine_memory_coefficients(config);
  const sim::MemoryCoefficients plan = MemoryPolicy{Precision::fp32, false}.coefficients();
  EXPECT_NEAR(plan.activation_per_token_layer, engine.activation_per_token_layer, 0.5);
  EXPECT_DOUBLE_EQ(plan.attention_score_bytes, engine.attention_score_bytes);
  EXPECT_NEAR(plan.weight_grad_held_per_token_layer, engine.weight_grad_held_per_token_layer, 0.5);
  EXPECT_DOUBLE_EQ(plan.kv_per_token_layer, engine.kv_per_token_layer);
  // The head: logits and 2H floats of inputs, per token.
  EXPECT_NEAR(plan.logits_bytes * config.vocab + plan.head_per_token * config.hidden,
              engine.logits_bytes * config.vocab, 16.0);
  EXPECT_DOUBLE_EQ(plan.parameter_bytes + plan.gradient_bytes + plan.optimizer_bytes,
                   engine.parameter_bytes + engine.gradient_bytes + engine.optimizer_bytes);
}

// mixed16 shards the 12 optimizer bytes over the data-parallel group; fp32 does not.
TEST(MemoryPolicy, StaticBytes) {
  const MemoryPolicy mixed{Precision::mixed16, false};
  EXPECT_DOUBLE_EQ(mixed.static_bytes(1000, 1), 18000);
  EXPECT_DOUBLE_EQ(mixed.static_bytes(1000, 4), 6000 + 3000);
  const MemoryPolicy fp32{Precision::fp32, false};
  EXPECT_DOUBLE_EQ(fp32.static_bytes(1000, 4), 16000);
  EXPECT_DOUBLE_EQ(mixed.reserve_bytes(16.0 * (1 << 30)), 2.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(fp32.reserve_bytes(1000), 100);
  // Recomputation keeps 2H per token and layer instead of 34H.
  EXPECT_DOUBLE_EQ(MemoryPolicy({Precision::mixed16, true}).coefficients().activation_per_token_layer, 2);
  EXPECT_DOUBLE_EQ(mixed.coefficients().activation_per_token_layer, 34);
}

}  // namespace
}  // namespace plait::plan
