#pragma once
// Text generation with a trained model (plait generate, train.sample_every; docs/engine.md,
// "Generation"): autoregressive decoding, one new token per forward of one position over the
// K/V cache (model::StageModel::decode), or — for the comparison — a forward of the whole
// prefix per token. Sampling follows the common recipe (llm.c, transformers' generate): the
// logits divided by the temperature, softmax, kept to the k most likely tokens (top-k) and then
// to the smallest set whose probability reaches p (nucleus sampling, Holtzman et al., ICLR
// 2020), renormalised, drawn by inverse CDF. Temperature 0 is greedy (the first largest logit).
// The uniform number of draw i is a function of (seed, i) alone (core/splitmix64.h), so a seed
// reproduces a sample, with or without the cache.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/model/stage_model.h"

namespace plait::runtime {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy
  int top_k = 0;             // 0: every token
  double top_p = 1.0;        // 1: every token (after top-k)
  std::uint64_t seed = 1234;
};

// The token drawn from `logits` (V values) for draw number `draw`. Throws plait::Error for
// options out of range (temperature < 0, top_k < 0, top_p not in (0, 1]).
int sample_token(std::span<const float> logits, const SamplingOptions& options, std::uint64_t draw);

struct Generation {
  std::vector<std::int32_t> tokens;  // the new tokens, in order
  // With keep_logits: per new token, the logits it was drawn from (V each).
  std::vector<std::vector<float>> logits;
  double prompt_seconds = 0;    // the forward of the prompt (with the cache), or 0
  double decode_seconds = 0;    // everything after it: the new tokens
  double tokens_per_second() const { return decode_seconds > 0 ? static_cast<double>(tokens.size()) / decode_seconds : 0; }
};

// Generates `count` tokens after `prompt` (>= 1 token) with a model of the whole network (one
// stage with the embedding and the head). With `use_cache` each new token is one decode step of
// one position; without it, each is a forward of the whole sequence so far. prompt.size() +
// count must not exceed max_seq (InputError naming it otherwise).
Generation generate(model::StageModel& model, std::span<const std::int32_t> prompt, int count,
                    const SamplingOptions& options, bool use_cache, bool keep_logits = false);

}  // namespace plait::runtime
