#pragma once
// The one description of a model, read by the engine (model/), the schedules and the sequence
// partition, the simulator's cost and memory models and the planner (torchtitan's model-args
// idea: one plain value with its sizes, and the counts computed from it).
//
// Two families, both pre-norm decoder-only transformers with a causal attention half and an
// MLP half per layer:
//   gpt2   GPT-2 (Radford et al. 2019): learned absolute positions, LayerNorm with bias, biased
//          linear layers, multi-head attention (kv_heads = heads), GELU MLP of width ffn_hidden
//          (4 * hidden by default), LM head tied to the token embedding by default.
//   llama  LLaMA (Touvron et al., arXiv 2302.13971; Hugging Face LlamaForCausalLM): RMSNorm,
//          rotary positions on q and k (theta rope_theta, HF's rotate-half pairing), grouped-
//          query attention (kv_heads divides heads; Ainslie et al., arXiv 2305.13245), SwiGLU
//          MLP of width ffn_hidden (Shazeer, arXiv 2002.05202), no biases, untied LM head by
//          default.
// Adding a family: its enum value and name here, its parameter count and FLOPs terms below
// (model_spec.cpp), its activation table (unit_memory.cpp), its block in model/ and its tensor
// names (model/parameter_layout.cpp) — docs/architecture.md, "Where to add".
#include <cstdint>
#include <string>
#include <string_view>

namespace plait::spec {

enum class Family { gpt2, llama };

std::string_view family_name(Family family);
// "gpt2" | "llama"; nullopt-free: throws plait::Error naming the families otherwise.
Family parse_family(std::string_view name);

struct ModelSpec {
  Family family = Family::gpt2;
  int layers = 0;
  int hidden = 0;      // C
  int heads = 0;       // query heads; head dimension d = hidden / heads
  int kv_heads = 0;    // key/value heads (= heads for gpt2)
  int ffn_hidden = 0;  // MLP width F
  int vocab = 0;       // V
  std::int64_t max_seq = 0;  // longest sequence (gpt2: rows of the learned position table)
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;  // llama only
  bool tie_embeddings = true;

  int head_dim() const { return heads > 0 ? hidden / heads : 0; }
  int kv_dim() const { return kv_heads * head_dim(); }  // width of K (and of V)
  int kv_group() const { return kv_heads > 0 ? heads / kv_heads : 0; }  // query heads per kv head
  bool learned_positions() const { return family == Family::gpt2; }
  bool has_biases() const { return family == Family::gpt2; }
  // Linear layers of the MLP: 2 for GELU (fc, proj), 3 for SwiGLU (gate, up, down).
  int mlp_matrices() const { return family == Family::gpt2 ? 2 : 3; }

  // Parameters of one transformer layer:
  //   gpt2:  4C (two LayerNorms) + (C + 2K)(C + 1) (qkv) + C(C + 1) (proj) + F(C + 1) + C(F + 1)
  //          = 12C^2 + 13C when K = C and F = 4C (GPT-2's count);
  //   llama: 2C (two RMSNorms) + C^2 (q) + 2KC (k, v) + C^2 (o) + 3FC (gate, up, down);
  //   K = kv_dim().
  std::int64_t layer_parameters() const;
  // The embedding: token table V*C, plus the position table max_seq*C for gpt2.
  std::int64_t embedding_parameters() const;
  // The final norm (gpt2 2C, llama C) plus the LM head V*C when it is untied or when the stage
  // holding the head does not hold the embedding (it then keeps its own copy of the tied table).
  std::int64_t head_parameters(bool holds_embedding) const;
  // A stage of `layers` layers, with the embedding and/or the head.
  std::int64_t stage_parameters(int layers, bool embedding, bool head) const;
  // The whole model on one stage.
  std::int64_t parameter_count() const { return stage_parameters(this->layers, true, true); }

  // Forward FLOPs per sample of a segment [start, start + length) (Seq1F1B, arXiv 2406.03488;
  // ../shared/reference/seq1f1b.md), generalised to grouped-query attention and SwiGLU:
  //   linear    = 2sC(2C + 2K) + 2sCF * mlp_matrices     (q, o: C x C; k, v: C x K; MLP)
  //   attention = (4d + 3) * n_h * (s*e - s^2/2)         (QK^T, PV, softmax over causal pairs
  //                                                        of the segment and its prefix)
  //   vocab     = 4sCV                                    (embedding counted as a matmul + head)
  // For gpt2 (K = C, F = 4C) linear = 8sC^2 + 4sCF, the reference's 8sH(n_h d) + 4sHF.
  double layer_linear_flops(std::int64_t length) const;
  double layer_attention_flops(std::int64_t start, std::int64_t length) const;
  double vocab_flops(std::int64_t length) const;
  double segment_forward_flops(std::int64_t start, std::int64_t length) const;
  // What recomputing one layer's forward costs per sample (spec/unit_memory.h,
  // "Recomputation"): its forward without the K/V projection (the K/V are kept) and without the
  // output projection (the next layer kept its input):
  //   layer_linear_flops - 2sC*2K - 2sCF + layer_attention_flops
  double layer_recompute_flops(std::int64_t start, std::int64_t length) const;
  // One layer's forward FLOPs per sample over a whole sequence of `seq` tokens.
  double layer_forward_flops(std::int64_t seq) const {
    return layer_linear_flops(seq) + layer_attention_flops(0, seq);
  }

  bool operator==(const ModelSpec&) const = default;
};

// A GPT-2 model of the given sizes (kv_heads = heads, ffn_hidden = 4 * hidden).
ModelSpec gpt2_model(int layers, int hidden, int heads, int vocab, std::int64_t max_seq,
                     bool tie_embeddings = true);

// Throws InputError(file, section + "." + field, ...) for the first impossible size: layers,
// hidden, heads, kv_heads, ffn_hidden, vocab, max_seq >= 1; heads divides hidden; kv_heads
// divides heads (and equals it for gpt2); an even head dimension for rotary positions (llama);
// a positive, finite norm_eps and rope_theta.
void check_model_spec(const ModelSpec& model, const std::string& file,
                      const std::string& section = "model");

// "llama 22 layers, hidden 2048, 32 heads (4 kv), ffn 5632, vocab 32000" for reports.
std::string describe(const ModelSpec& model);

}  // namespace plait::spec
