// The one table of tensor-parallel splits (spec/tensor_parallel_plan.h) against the tensors the
// engine lays out (model/parameter_layout.h): every tensor of every family and tying has exactly
// one rule, of its shape, and every rule is used; the per-rank counts add up to the stage's.
#include "plait/spec/tensor_parallel_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "plait/core/error.h"
#include "plait/model/parameter_layout.h"
#include "plait/model/stage_model.h"
#include "plait/model/tensor_shard_copy.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using spec::TensorSplit;

// Both families (tests/model/tiny_model.h), each tied and untied.
std::vector<spec::ModelSpec> every_kind() {
  std::vector<spec::ModelSpec> out;
  for (spec::Family f : {spec::Family::gpt2, spec::Family::llama}) {
    for (bool tied : {true, false}) {
      spec::ModelSpec m = testing::tiny_model(f);
      m.tie_embeddings = tied;
      out.push_back(m);
    }
  }
  return out;
}

TEST(TensorParallelPlan, EveryTensorHasExactlyOneRuleOfItsShapeAndEveryRuleIsUsed) {
  for (const spec::ModelSpec& m : every_kind()) {
    SCOPED_TRACE(spec::describe(m));
    std::set<const spec::TensorSplitRule*> used;
    for (const StageSpec& stage : {StageSpec::whole_model(m), StageSpec{0, 1, true, false}, StageSpec{1, 2, false, true}}) {
      for (const NamedTensor& t : parameter_layout(m, stage)) {
        int matches = 0;
        for (const spec::TensorSplitRule& r : spec::tensor_parallel_plan(m.family)) {
          const bool layer = t.name.starts_with(m.family == spec::Family::gpt2 ? "h." : "model.layers.");
          const std::string local = layer ? t.name.substr(t.name.find('.', t.name.find('.') + 1) + 1) : t.name;
          if (m.family == spec::Family::llama && layer) {
            // "model.layers.3.<suffix>"
            const std::string rest = t.name.substr(std::string("model.layers.").size());
            matches += r.per_layer && rest.substr(rest.find('.') + 1) == r.name;
          } else {
            matches += r.per_layer == layer && local == r.name;
          }
        }
        const spec::TensorSplitRule& rule = spec::tensor_split_rule(m, t.name);
        // GPT-2's untied lm_head has its own entry outside the family table.
        EXPECT_EQ(matches + (t.name == "lm_head.weight" && m.family == spec::Family::gpt2 ? 1 : 0), 1) << t.name;
        EXPECT_EQ(rule.shape(m), t.shape) << t.name;
        used.insert(&rule);
      }
    }
    for (const spec::TensorSplitRule& r : spec::tensor_parallel_plan(m.family)) {
      const bool tied_llama_head = m.family == spec::Family::llama && m.tie_embeddings && r.name == "lm_head.weight";
      if (!tied_llama_head) EXPECT_TRUE(used.count(&r)) << r.name << " is never laid out";
    }
  }
}

TEST(TensorParallelPlan, MegatronPlacement) {
  const spec::ModelSpec g = spec::gpt2_model(2, 32, 4, 301, 64);
  auto split = [&](const spec::ModelSpec& m, const char* name) { return spec::tensor_split_rule(m, name).split; };
  EXPECT_EQ(split(g, "h.1.attn.c_attn.weight"), TensorSplit::column);
  EXPECT_EQ(split(g, "h.1.attn.c_proj.weight"), TensorSplit::row);
  EXPECT_EQ(split(g, "h.1.attn.c_proj.bias"), TensorSplit::replicated);
  EXPECT_EQ(split(g, "h.0.mlp.c_fc.bias"), TensorSplit::column);
  EXPECT_EQ(split(g, "h.0.mlp.c_proj.weight"), TensorSplit::row);
  EXPECT_EQ(split(g, "wte"), TensorSplit::vocabulary);
  EXPECT_EQ(split(g, "wpe"), TensorSplit::replicated);
  EXPECT_TRUE(spec::tensor_split_rule(g, "h.0.ln_2.bias").sequence_parallel);
  const spec::ModelSpec l = testing::tiny_model(spec::Family::llama);
  EXPECT_EQ(split(l, "model.layers.2.self_attn.k_proj.weight"), TensorSplit::column);
  EXPECT_EQ(split(l, "model.layers.2.self_attn.o_proj.weight"), TensorSplit::row);
  EXPECT_EQ(split(l, "model.layers.0.mlp.up_proj.weight"), TensorSplit::column);
  EXPECT_EQ(split(l, "model.layers.0.mlp.down_proj.weight"), TensorSplit::row);
  EXPECT_EQ(split(l, "model.norm.weight"), TensorSplit::replicated);
  EXPECT_EQ(split(l, "lm_head.weight"), TensorSplit::vocabulary);
  EXPECT_THROW(spec::tensor_split_rule(l, "model.layers.0.mlp.c_fc.weight"), Error);
}

// GPT-2's fused c_attn: rank i holds its query heads AND its K/V heads, three blocks.
TEST(TensorParallelPlan, FusedQkvSplitsByHeadsInThreeBlocks) {
  const spec::ModelSpec g = spec::gpt2_model(2, 32, 4, 301, 64);
  const spec::TensorShard s = spec::tensor_shard(g, spec::tensor_split_rule(g, "h.0.attn.c_attn.weight"), 2, 1);
  EXPECT_EQ(s.dim, 0);
  ASSERT_EQ(s.ranges.size(), 3u);
  EXPECT_EQ(s.ranges[0], (std::pair<std::int64_t, std::int64_t>{16, 16}));
  EXPECT_EQ(s.ranges[1], (std::pair<std::int64_t, std::int64_t>{48, 16}));
  EXPECT_EQ(s.ranges[2], (std::pair<std::int64_t, std::int64_t>{80, 16}));
  EXPECT_EQ(s.numel, 48 * 32);
  const spec::TensorShard row = spec::tensor_shard(g, spec::tensor_split_rule(g, "h.0.mlp.c_proj.weight"), 4, 3);
  EXPECT_EQ(row.dim, 1);
  EXPECT_EQ(row.ranges[0], (std::pair<std::int64_t, std::int64_t>{96, 32}));
}

// Per-rank parameters: the split tensors 1/t, the replicated whole, the vocabulary padded to
// 128 t; t = 1 is the stage's own count, and t ranks' shares of the split tensors add up to them.
TEST(TensorParallelPlan, RankParametersAddUp) {
  for (const spec::ModelSpec& m : every_kind()) {
    SCOPED_TRACE(spec::describe(m));
    for (auto [layers, first, last] : {std::tuple{3, true, true}, std::tuple{1, true, false}, std::tuple{2, false, true}}) {
      EXPECT_EQ(spec::tensor_parallel_stage_parameters(m, 1, layers, first, last), m.stage_parameters(layers, first, last));
      const std::int64_t replicated = spec::replicated_stage_parameters(m, layers, first, last);
      const std::int64_t split = m.stage_parameters(layers, first, last) - replicated;
      const int t = 2;
      // Vocabulary rows added by padding 37 to 128 t = 256: 219 rows of C per table held.
      ASSERT_EQ(spec::padded_vocab(m, t), 256);
      int tables = 0;
      if (first) ++tables;
      if (last && (!m.tie_embeddings || !first)) ++tables;
      const std::int64_t padding = tables * (256 - 37) * std::int64_t{m.hidden};
      EXPECT_EQ(t * (spec::tensor_parallel_stage_parameters(m, t, layers, first, last) - replicated), split + padding);
    }
  }
}

}  // namespace
}  // namespace plait::model

namespace plait::model {
namespace {

// A TP rank's layout holds its part of every tensor (the table's shard), and the parts of the t
// ranks put back into whole tensors give the single process's initialisation exactly: the
// parts are cut from the whole tensor's draw, so any degree starts from the same model.
TEST(TensorParallelLayout, RanksHoldTheirPartsAndThePartsMakeTheWhole) {
  for (const spec::ModelSpec& m : every_kind()) {
    SCOPED_TRACE(spec::describe(m));
    if (m.kv_heads % 2 != 0) continue;
    MemoryTracker tracker;
    StageModel whole(m, StageSpec::whole_model(m), tracker);
    whole.init_parameters(5);
    const int t = 2;
    std::vector<std::vector<float>> rebuilt;
    for (const NamedTensor& w : whole.tensors()) rebuilt.emplace_back(w.numel, -1.0f);
    for (int r = 0; r < t; ++r) {
      StageSpec spec = StageSpec::whole_model(m);
      spec.tensor_parallel = t;
      spec.tp_rank = r;
      const std::vector<NamedTensor> layout = parameter_layout(m, spec);
      ASSERT_EQ(layout.size(), whole.tensors().size());
      std::int64_t held = 0;
      for (const NamedTensor& p : layout) held += static_cast<std::int64_t>(p.numel);
      EXPECT_EQ(held, spec::tensor_parallel_stage_parameters(m, t, m.layers, true, true));
      // The part a rank's initialisation draws, put into the whole.
      for (std::size_t i = 0; i < layout.size(); ++i) {
        const NamedTensor& p = layout[i];
        EXPECT_EQ(p.name, whole.tensors()[i].name);
        EXPECT_EQ(p.full_shape, whole.tensors()[i].shape);
        std::vector<float> part(p.numel);
        copy_shard_out(whole.parameter(p.name), p, part);
        copy_shard_in(rebuilt[i], p, part);
        const spec::TensorSplitRule& rule = spec::tensor_split_rule(m, p.name);
        EXPECT_EQ(p.tp_replicated, rule.split == spec::TensorSplit::replicated) << p.name;
        EXPECT_EQ(p.tp_all_reduced, p.tp_replicated && rule.sequence_parallel) << p.name;
      }
    }
    for (std::size_t i = 0; i < rebuilt.size(); ++i) {
      const auto want = whole.parameter(whole.tensors()[i].name);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), rebuilt[i].begin())) << whole.tensors()[i].name;
    }
  }
}

// A stage of a TP rank refuses to be built without its group, or with another.
TEST(TensorParallelLayout, AStageNeedsItsGroup) {
  const spec::ModelSpec m = every_kind().front();
  StageSpec spec = StageSpec::whole_model(m);
  spec.tensor_parallel = 2;
  MemoryTracker tracker;
  EXPECT_THROW(StageModel(m, spec, tracker), Error);
  spec.tp_rank = 2;
  EXPECT_THROW(parameter_layout(m, spec), Error);
}

}  // namespace
}  // namespace plait::model
