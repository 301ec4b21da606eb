#pragma once
// Small models of both families for the Hugging Face and generation tests, and weights spread
// far from their initialisation, so that every term of the model shows in its logits.
#include <random>

#include "plait/model/stage_model.h"

namespace plait::runtime::test {

// gpt2: 2 layers of 32 with 4 heads; llama: 2 layers of 32, 4 query heads sharing 2 K/V heads.
inline spec::ModelSpec small_model(spec::Family family, int vocab, int max_seq, bool tied, int ffn = 48,
                                   double rope_theta = 5000.0) {
  if (family == spec::Family::gpt2) return spec::gpt2_model(2, 32, 4, vocab, max_seq, tied);
  spec::ModelSpec m;
  m.family = spec::Family::llama;
  m.layers = 2;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.max_seq = max_seq;
  m.rope_theta = rope_theta;
  m.norm_eps = 1e-6;
  m.tie_embeddings = tied;
  return m;
}

// Matrices scaled by `scale` (std 0.02 * scale), norm gains and biases moved by up to ±jitter.
inline void spread(model::StageModel& m, unsigned seed, float scale, float jitter) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-jitter, jitter);
  for (const model::NamedTensor& t : m.tensors()) {
    for (float& x : m.parameters().subspan(t.offset, t.numel)) {
      x = t.init.kind == model::TensorInit::Kind::normal ? scale * x : x + u(rng);
    }
  }
}

}  // namespace plait::runtime::test
