#pragma once
// A tiny GPT and helpers to run micro-batches through StageModels, shared by the model tests.
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <random>
#include <vector>

#include "plait/model/stage_model.h"

namespace plait::model::testing {

inline GPTConfig tiny_config() {
  GPTConfig c;
  c.layers = 2;
  c.hidden = 16;
  c.heads = 2;
  c.vocab = 37;
  c.max_seq = 24;
  return c;
}

struct Batch {
  int rows = 0, seq = 0;
  std::vector<std::int32_t> tokens, targets;  // (rows, seq)
};

inline Batch random_batch(int rows, int seq, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  Batch b{rows, seq, {}, {}};
  for (int i = 0; i < rows * seq; ++i) {
    b.tokens.push_back(dist(rng));
    b.targets.push_back(dist(rng));
  }
  return b;
}

// Columns [start, start + length) of a (rows, seq) array, as a (rows, length) array.
template <typename T>
std::vector<T> columns(const std::vector<T>& a, int rows, int seq, const Segment& s) {
  std::vector<T> out(static_cast<std::size_t>(rows) * s.length);
  for (int r = 0; r < rows; ++r) {
    std::memcpy(out.data() + static_cast<std::size_t>(r) * s.length,
                a.data() + static_cast<std::size_t>(r) * seq + s.start, s.length * sizeof(T));
  }
  return out;
}

enum class Backward { kFused, kSplitImmediate, kSplitDeferred };

// One micro-batch through a single whole-model stage: F over the segments in order, then the
// backwards in reverse (B+W fused, B then W per unit, or all B then all W). Returns the loss.
inline double run_whole_model(StageModel& m, int microbatch, const Batch& b,
                              const std::vector<Segment>& segments, double loss_scale,
                              Backward mode) {
  double loss = 0;
  for (const Segment& s : segments) {
    const auto tok = columns(b.tokens, b.rows, b.seq, s);
    const auto tgt = columns(b.targets, b.rows, b.seq, s);
    loss += m.forward_loss(microbatch, b.rows, s, nullptr, tok.data(), tgt.data(), loss_scale);
  }
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    if (mode == Backward::kFused) {
      m.backward(microbatch, *it, nullptr, nullptr);
    } else {
      m.backward_input(microbatch, *it, nullptr, nullptr);
      if (mode == Backward::kSplitImmediate) m.backward_weight(microbatch, *it);
    }
  }
  if (mode == Backward::kSplitDeferred) {
    // Same unit order as the fused backward, so the accumulation order into the gradients is too.
    for (auto it = segments.rbegin(); it != segments.rend(); ++it) m.backward_weight(microbatch, *it);
  }
  return loss;
}

// max_i |a_i - b_i| / max_i |b_i| over one tensor.
inline double scaled_max_error(std::span<const float> a, std::span<const float> b) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace plait::model::testing
