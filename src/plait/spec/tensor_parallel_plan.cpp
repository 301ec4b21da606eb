#include "plait/spec/tensor_parallel_plan.h"

#include <array>

#include "plait/core/error.h"

namespace plait::spec {

namespace {

using Shape = std::vector<std::int64_t>;

Shape hidden(const ModelSpec& m) { return {m.hidden}; }
Shape qkv_rows(const ModelSpec& m) { return {m.hidden + 2 * std::int64_t{m.kv_dim()}}; }
Shape qkv(const ModelSpec& m) { return {m.hidden + 2 * std::int64_t{m.kv_dim()}, m.hidden}; }
Shape qkv_blocks(const ModelSpec& m) { return {m.hidden, m.kv_dim(), m.kv_dim()}; }
Shape square(const ModelSpec& m) { return {m.hidden, m.hidden}; }
Shape kv(const ModelSpec& m) { return {m.kv_dim(), m.hidden}; }
Shape ffn_rows(const ModelSpec& m) { return {m.ffn_hidden}; }
Shape up(const ModelSpec& m) { return {m.ffn_hidden, m.hidden}; }
Shape down(const ModelSpec& m) { return {m.hidden, m.ffn_hidden}; }
Shape table(const ModelSpec& m) { return {m.vocab, m.hidden}; }
Shape positions(const ModelSpec& m) { return {m.max_seq, m.hidden}; }

using TS = TensorSplit;
constexpr std::string_view kNorm = "norm on the rank's sequence slice (sequence parallelism); gradient all-reduced";
constexpr std::string_view kColumn = "column-parallel: after the all-gather of the normed input";
constexpr std::string_view kRow = "row-parallel: its partial sums are reduce-scattered";
constexpr std::string_view kRowBias =
    "added once, after the reduce-scatter; gradient taken whole from the gathered output gradient";

// model/parameter_layout.cpp's tensors, in its order.
const std::array<TensorSplitRule, 16> kGpt2 = {{
    {"ln_1.weight", true, TS::replicated, true, hidden, nullptr, kNorm},
    {"ln_1.bias", true, TS::replicated, true, hidden, nullptr, kNorm},
    {"attn.c_attn.weight", true, TS::column, false, qkv, qkv_blocks, "column-parallel by heads: each rank its q, k and v heads"},
    {"attn.c_attn.bias", true, TS::column, false, qkv_rows, qkv_blocks, "split with its weight's rows"},
    {"attn.c_proj.weight", true, TS::row, false, square, nullptr, kRow},
    {"attn.c_proj.bias", true, TS::replicated, false, hidden, nullptr, kRowBias},
    {"ln_2.weight", true, TS::replicated, true, hidden, nullptr, kNorm},
    {"ln_2.bias", true, TS::replicated, true, hidden, nullptr, kNorm},
    {"mlp.c_fc.weight", true, TS::column, false, up, nullptr, kColumn},
    {"mlp.c_fc.bias", true, TS::column, false, ffn_rows, nullptr, "split with its weight's rows"},
    {"mlp.c_proj.weight", true, TS::row, false, down, nullptr, kRow},
    {"mlp.c_proj.bias", true, TS::replicated, false, hidden, nullptr, kRowBias},
    {"wte", false, TS::vocabulary, false, table, nullptr,
     "vocabulary-parallel embedding (and the tied LM head); V padded to 128 t"},
    {"wpe", false, TS::replicated, false, positions, nullptr,
     "added once, by TP rank 0 to its partial lookup before the reduce-scatter; gradient taken whole from the "
     "gathered output gradient"},
    {"ln_f.weight", false, TS::replicated, true, hidden, nullptr, kNorm},
    {"ln_f.bias", false, TS::replicated, true, hidden, nullptr, kNorm},
}};
// lm_head.weight of an untied GPT-2 (GPT2LMHeadModel always ties; plait allows untying).
const std::array<TensorSplitRule, 1> kGpt2Untied = {{
    {"lm_head.weight", false, TS::vocabulary, false, table, nullptr,
     "vocabulary-parallel LM head and cross-entropy: no rank holds V logits"},
}};

const std::array<TensorSplitRule, 12> kLlama = {{
    {"input_layernorm.weight", true, TS::replicated, true, hidden, nullptr, kNorm},
    {"self_attn.q_proj.weight", true, TS::column, false, square, nullptr, "column-parallel by query heads"},
    {"self_attn.k_proj.weight", true, TS::column, false, kv, nullptr, "column-parallel by K/V heads (kv_heads % t == 0)"},
    {"self_attn.v_proj.weight", true, TS::column, false, kv, nullptr, "column-parallel by K/V heads (kv_heads % t == 0)"},
    {"self_attn.o_proj.weight", true, TS::row, false, square, nullptr, kRow},
    {"post_attention_layernorm.weight", true, TS::replicated, true, hidden, nullptr, kNorm},
    {"mlp.gate_proj.weight", true, TS::column, false, up, nullptr, kColumn},
    {"mlp.up_proj.weight", true, TS::column, false, up, nullptr, kColumn},
    {"mlp.down_proj.weight", true, TS::row, false, down, nullptr, kRow},
    {"model.embed_tokens.weight", false, TS::vocabulary, false, table, nullptr,
     "vocabulary-parallel embedding; V padded to 128 t"},
    {"model.norm.weight", false, TS::replicated, true, hidden, nullptr, kNorm},
    {"lm_head.weight", false, TS::vocabulary, false, table, nullptr,
     "vocabulary-parallel LM head and cross-entropy: no rank holds V logits"},
}};

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Elements rank-local of a tensor (the same on every rank: t divides every split dimension).
std::int64_t rank_numel(const ModelSpec& m, const TensorSplitRule& rule, int t) {
  return tensor_shard(m, rule, t, 0).numel;
}

// The layer part of the table and the non-layer rules a stage part holds.
template <class Visit>
void visit_stage(const ModelSpec& m, bool embedding, bool head, Visit&& visit) {
  const bool gpt2 = m.family == Family::gpt2;
  const std::span<const TensorSplitRule> rules =
      gpt2 ? std::span<const TensorSplitRule>(kGpt2) : std::span<const TensorSplitRule>(kLlama);
  const std::string_view token_table = gpt2 ? "wte" : "model.embed_tokens.weight";
  for (const TensorSplitRule& r : rules) {
    if (r.per_layer) {
      visit(r, true);
      continue;
    }
    const bool is_table = r.name == token_table;
    const bool is_embedding_part = is_table || r.name == "wpe";
    const bool is_head_norm = r.name.starts_with("ln_f.") || r.name == "model.norm.weight";
    if (is_embedding_part && embedding) visit(r, false);
    if (is_head_norm && head) visit(r, false);
    // The head's matrix: the tied table (own copy when the embedding is elsewhere) or lm_head.
    if (head && m.tie_embeddings && is_table && !embedding) visit(r, false);
    if (head && !m.tie_embeddings && r.name == "lm_head.weight") visit(r, false);
  }
  if (gpt2 && head && !m.tie_embeddings) visit(kGpt2Untied[0], false);
}

}  // namespace

std::string_view tensor_split_name(TensorSplit split) {
  switch (split) {
    case TensorSplit::column: return "column";
    case TensorSplit::row: return "row";
    case TensorSplit::vocabulary: return "vocabulary";
    case TensorSplit::replicated: return "replicated";
  }
  return "?";
}

std::span<const TensorSplitRule> tensor_parallel_plan(Family family) {
  return family == Family::gpt2 ? std::span<const TensorSplitRule>(kGpt2) : std::span<const TensorSplitRule>(kLlama);
}

const TensorSplitRule& tensor_split_rule(const ModelSpec& model, std::string_view name) {
  const bool gpt2 = model.family == Family::gpt2;
  const std::string_view prefix = gpt2 ? "h." : "model.layers.";
  std::string_view local = name;
  bool per_layer = false;
  if (name.starts_with(prefix)) {
    const std::size_t dot = name.find('.', prefix.size());
    if (dot != std::string_view::npos) {
      local = name.substr(dot + 1);
      per_layer = true;
    }
  }
  for (const TensorSplitRule& r : tensor_parallel_plan(model.family)) {
    if (r.per_layer == per_layer && r.name == local) return r;
  }
  if (gpt2 && !per_layer && name == kGpt2Untied[0].name) return kGpt2Untied[0];
  throw Error("tensor parallel plan: no split rule for tensor '" + std::string(name) + "' of a " +
              std::string(family_name(model.family)) + " model");
}

void check_tensor_parallel(const ModelSpec& m, int t) {
  if (t < 1) throw Error("tensor parallelism: the degree must be at least 1, found " + std::to_string(t));
  if (t == 1) return;
  const std::string tp = "the tensor-parallel size " + std::to_string(t);
  if (m.heads % t != 0) {
    throw Error("tensor parallelism: heads " + std::to_string(m.heads) + " is not divisible by " + tp +
                " (each rank computes whole query heads)");
  }
  if (m.kv_heads % t != 0) {
    throw Error("tensor parallelism: kv_heads " + std::to_string(m.kv_heads) + " is not divisible by " + tp +
                "; K/V heads are split over the TP group as Megatron-core requires (plait does not replicate "
                "them); choose t dividing " + std::to_string(m.kv_heads));
  }
  if (m.ffn_hidden % t != 0) {
    throw Error("tensor parallelism: ffn_hidden " + std::to_string(m.ffn_hidden) + " is not divisible by " + tp);
  }
}

std::int64_t padded_vocab(const ModelSpec& m, int t) {
  if (t <= 1) return m.vocab;
  const std::int64_t multiple = 128 * std::int64_t{t};
  return (m.vocab + multiple - 1) / multiple * multiple;
}

TensorShard tensor_shard(const ModelSpec& m, const TensorSplitRule& rule, int t, int rank) {
  if (t < 1 || rank < 0 || rank >= t) {
    throw Error("tensor_shard: rank " + std::to_string(rank) + " of a TP group of " + std::to_string(t));
  }
  const Shape shape = rule.shape(m);
  TensorShard s;
  const std::int64_t rest = shape.size() > 1 ? shape[1] : 1;  // elements per row
  switch (rule.split) {
    case TensorSplit::replicated:
      s.numel = numel(shape);
      return s;
    case TensorSplit::column: {
      s.dim = 0;
      const Shape blocks = rule.blocks ? rule.blocks(m) : Shape{shape[0]};
      std::int64_t start = 0;
      for (std::int64_t b : blocks) {
        s.ranges.push_back({start + rank * (b / t), b / t});
        s.numel += b / t * rest;
        start += b;
      }
      return s;
    }
    case TensorSplit::row: {
      s.dim = 1;
      const std::int64_t cols = shape[1] / t;
      s.ranges.push_back({rank * cols, cols});
      s.numel = shape[0] * cols;
      return s;
    }
    case TensorSplit::vocabulary: {
      s.dim = 0;
      const std::int64_t rows = padded_vocab(m, t) / t;
      s.ranges.push_back({rank * rows, rows});
      s.numel = rows * rest;
      return s;
    }
  }
  return s;
}

std::int64_t tensor_parallel_stage_parameters(const ModelSpec& m, int t, int layers, bool embedding, bool head) {
  std::int64_t total = 0;
  visit_stage(m, embedding, head, [&](const TensorSplitRule& r, bool per_layer) {
    total += (per_layer ? layers : 1) * rank_numel(m, r, t);
  });
  return total;
}

std::int64_t replicated_stage_parameters(const ModelSpec& m, int layers, bool embedding, bool head) {
  std::int64_t total = 0;
  visit_stage(m, embedding, head, [&](const TensorSplitRule& r, bool per_layer) {
    if (r.split == TensorSplit::replicated) total += (per_layer ? layers : 1) * numel(r.shape(m));
  });
  return total;
}

std::int64_t all_reduced_stage_parameters(const ModelSpec& m, int layers, bool embedding, bool head) {
  std::int64_t total = 0;
  visit_stage(m, embedding, head, [&](const TensorSplitRule& r, bool per_layer) {
    if (r.split == TensorSplit::replicated && r.sequence_parallel) total += (per_layer ? layers : 1) * numel(r.shape(m));
  });
  return total;
}

void check_sequence_parallel(const std::vector<std::int64_t>& lengths, int t) {
  if (t <= 1) return;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] % t != 0) {
      throw Error("sequence parallelism: segment " + std::to_string(i) + " has " + std::to_string(lengths[i]) +
                  " tokens, not divisible by the tensor-parallel size " + std::to_string(t) +
                  " (each rank holds 1/t of a unit's tokens); cut with --split flops:" + std::to_string(t) +
                  " (lengths rounded to multiples of t, as the Seq1F1B reference does)");
    }
  }
}

double ring_collective_seconds(Collective c, double bytes, int t, double alpha, double beta) {
  if (t <= 1 || bytes <= 0) return 0.0;
  const double steps = t - 1.0, share = (t - 1.0) / t;
  const double one = steps * alpha + share * bytes / beta;
  return c == Collective::all_reduce ? 2.0 * one : one;
}

TpCollectives tp_collectives(UnitPass pass, int layers, bool embedding, bool head) {
  TpCollectives c;
  switch (pass) {
    case UnitPass::forward:
      c.all_gathers = 2 * layers + (head ? 1 : 0);
      c.reduce_scatters = 2 * layers + (embedding ? 1 : 0);
      c.all_reduces = head ? 3 : 0;
      break;
    case UnitPass::backward_input:
      c.all_gathers = 2 * layers;
      c.reduce_scatters = 2 * layers + (head ? 1 : 0);
      break;
    case UnitPass::backward_weight:
      c.all_gathers = 4 * layers + (embedding ? 1 : 0) + (head ? 1 : 0);
      break;
  }
  return c;
}

double tp_collective_seconds(const TpCollectives& c, double tokens, int hidden, double element_bytes, int t,
                             double alpha, double beta) {
  const double gathered = tokens * hidden * element_bytes;
  const double partial_sums = tokens * hidden * 4.0;  // reduce-scattered in fp32 in both precisions
  return c.all_gathers * ring_collective_seconds(Collective::all_gather, gathered, t, alpha, beta) +
         c.reduce_scatters * ring_collective_seconds(Collective::reduce_scatter, partial_sums, t, alpha, beta) +
         c.all_reduces * ring_collective_seconds(Collective::all_reduce, tokens * 4.0, t, alpha, beta);
}

}  // namespace plait::spec
