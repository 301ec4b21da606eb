#pragma once
// Tiny models of both families and helpers to run micro-batches through StageModels, shared by
// the model tests; every test runs once per family (FamilyTest).
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "plait/core/memory_tracker.h"
#include "plait/model/stage_model.h"

namespace plait::model::testing {

// gpt2: 2 layers of 16 with 2 heads; llama: 2 layers of 16 with 4 query heads of 4 sharing 2 K/V
// heads, SwiGLU of 24, untied head, rotary theta 100 (short sequences still turn the second
// frequency pair by several radians).
inline spec::ModelSpec tiny_model(spec::Family family) {
  if (family == spec::Family::gpt2) return spec::gpt2_model(2, 16, 2, 37, 24);
  spec::ModelSpec m;
  m.family = spec::Family::llama;
  m.layers = 2;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 24;
  m.vocab = 37;
  m.max_seq = 24;
  m.rope_theta = 100.0;
  m.tie_embeddings = false;
  return m;
}

// Parameterised over the families: TEST_P(Suite, ...) with `class Suite : public FamilyTest {};`
// and PLAIT_FOR_EVERY_FAMILY(Suite).
class FamilyTest : public ::testing::TestWithParam<spec::Family> {
 protected:
  spec::ModelSpec tiny() const { return tiny_model(GetParam()); }
};
#define PLAIT_FOR_EVERY_FAMILY(suite)                                                         \
  INSTANTIATE_TEST_SUITE_P(Families, suite,                                                   \
                           ::testing::Values(::plait::spec::Family::gpt2, ::plait::spec::Family::llama), \
                           [](const auto& info) { return std::string(::plait::spec::family_name(info.param)); })

// The segments of a sequence cut at the given lengths.
inline std::vector<Segment> segments_from_lengths(int seq, const std::vector<int>& lengths) {
  const spec::ModelSpec any = spec::gpt2_model(1, 8, 1, 8, seq);
  const spec::SequencePartition p =
      spec::partition_from_lengths(any, std::vector<std::int64_t>(lengths.begin(), lengths.end()));
  EXPECT_EQ(p.seq(), seq);
  std::vector<Segment> out;
  for (int i = 0; i < p.count(); ++i) out.push_back(p.segment(i));
  return out;
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

// A stage without embedding or head run on random inputs and output gradients of `segments`
// (one micro-batch, rows x length x hidden per segment; seed 3): the forwards in order, then the
// backwards in reverse, fused or B with every W after all of them. Returns the parameter
// gradients and dL/d(input) of the segments in backward order.
struct MiddleStageRun {
  std::vector<float> gradients, grad_in;
};
inline MiddleStageRun run_middle_stage(const spec::ModelSpec& config, const StageSpec& spec, int rows,
                                       const std::vector<Segment>& segments, bool fused) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> in, grad_out;
  for (const Segment& s : segments) {
    const std::size_t n = static_cast<std::size_t>(rows) * s.length * config.hidden;
    in.emplace_back(n);
    grad_out.emplace_back(n);
    for (auto& v : in.back()) v = dist(rng);
    for (auto& v : grad_out.back()) v = dist(rng);
  }
  MemoryTracker tracker;
  StageModel m(config, spec, tracker);
  m.init_parameters(11);
  std::vector<float> out(in.back().size());
  for (std::size_t i = 0; i < segments.size(); ++i) {
    out.resize(in[i].size());
    m.forward(0, rows, segments[i], in[i].data(), nullptr, out.data());
  }
  MiddleStageRun r;
  for (std::size_t i = segments.size(); i-- > 0;) {
    std::vector<float> grad_in(in[i].size());
    if (fused) {
      m.backward(0, segments[i], grad_out[i].data(), grad_in.data());
    } else {
      m.backward_input(0, segments[i], grad_out[i].data(), grad_in.data());
    }
    r.grad_in.insert(r.grad_in.end(), grad_in.begin(), grad_in.end());
  }
  if (!fused) {
    for (std::size_t i = segments.size(); i-- > 0;) m.backward_weight(0, segments[i]);
  }
  r.gradients.assign(m.gradients().begin(), m.gradients().end());
  return r;
}

// The same bits.
inline bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
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
