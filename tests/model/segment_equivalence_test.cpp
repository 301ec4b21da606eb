// Processing a sequence as k segments of any lengths gives the loss and every parameter gradient
// of processing it whole (seq1f1b.md, "Attention across segments"); cutting the model into
// pipeline stages changes nothing either.
//
// Metric: for every tensor, max_i |g_i - g_ref_i| / max_i |g_ref_i| <= 1e-5 (the error relative
// to the tensor's gradient scale; an elementwise relative error is meaningless for entries that
// cancel to ~0), and |loss - loss_ref| / loss_ref <= 1e-6. The differences are fp32
// reassociation: attention sums P v and dS^T q over differently blocked keys.
#include <gtest/gtest.h>

#include <cstdio>

#include "plait/core/memory_tracker.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class Segments : public FamilyTest {};

constexpr double kGradientTolerance = 1e-5;
constexpr double kLossTolerance = 1e-6;
constexpr std::uint64_t kSeed = 7;

struct Reference {
  double loss;
  std::vector<float> gradients;
};

Reference whole_sequence(const spec::ModelSpec& config, const Batch& b, double scale) {
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  m.init_parameters(kSeed);
  const double loss =
      run_whole_model(m, 0, b, {{0, 0, b.seq}}, scale, Backward::kFused);
  return {loss, std::vector<float>(m.gradients().begin(), m.gradients().end())};
}

double worst_tensor_error(const StageModel& m, const std::vector<float>& reference) {
  double worst = 0;
  for (const NamedTensor& t : m.tensors()) {
    worst = std::max(worst, scaled_max_error(m.gradients().subspan(t.offset, t.numel),
                                             std::span<const float>(reference).subspan(t.offset, t.numel)));
  }
  return worst;
}

TEST_P(Segments, AnyCutGivesTheWholeSequenceLossAndGradients) {
  const spec::ModelSpec config = tiny();
  const Batch b = random_batch(2, 13, config.vocab, 1);
  const double scale = 1.0 / (b.rows * b.seq);
  const Reference ref = whole_sequence(config, b, scale);

  const std::vector<std::vector<int>> cuts = {{13}, {9, 4}, {2, 7, 4}, {4, 1, 5, 3}};
  for (const auto& lengths : cuts) {
    for (Backward mode : {Backward::kFused, Backward::kSplitDeferred}) {
      MemoryTracker tracker;
      StageModel m(config, StageSpec::whole_model(config), tracker);
      m.init_parameters(kSeed);
      const double loss =
          run_whole_model(m, 3, b, segments_from_lengths(b.seq, lengths), scale, mode);
      const double err = worst_tensor_error(m, ref.gradients);
      SCOPED_TRACE("k = " + std::to_string(lengths.size()));
      EXPECT_LE(std::abs(loss - ref.loss) / ref.loss, kLossTolerance);
      EXPECT_LE(err, kGradientTolerance);
      char text[32];
      std::snprintf(text, sizeof text, "%.3e", err);
      RecordProperty("worst_gradient_error_k" + std::to_string(lengths.size()), text);
      EXPECT_EQ(m.microbatches_in_flight(), 0u);
      EXPECT_EQ(tracker.current(MemoryCategory::kActivations), 0u);
      EXPECT_EQ(tracker.current(MemoryCategory::kKVCache), 0u);
    }
  }
}

TEST_P(Segments, InterleavedMicrobatchesGiveTheSequentialGradients) {
  const spec::ModelSpec config = tiny();
  const Batch b0 = random_batch(2, 11, config.vocab, 1), b1 = random_batch(3, 11, config.vocab, 2);
  const auto segs = segments_from_lengths(11, {5, 6});
  MemoryTracker t1, t2;
  StageModel seq(config, StageSpec::whole_model(config), t1), mixed(config, StageSpec::whole_model(config), t2);
  seq.init_parameters(kSeed);
  mixed.init_parameters(kSeed);
  const double l_seq = run_whole_model(seq, 0, b0, segs, 0.01, Backward::kFused) +
                       run_whole_model(seq, 1, b1, segs, 0.01, Backward::kFused);
  // F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 (W later) B1.0: a Seq1F1B-like interleaving, with
  // different batch sizes per micro-batch.
  auto fwd = [&](int mb, const Batch& b, const Segment& s) {
    const auto tok = columns(b.tokens, b.rows, b.seq, s);
    const auto tgt = columns(b.targets, b.rows, b.seq, s);
    return mixed.forward_loss(mb, b.rows, s, nullptr, tok.data(), tgt.data(), 0.01);
  };
  double l_mixed = fwd(0, b0, segs[0]) + fwd(1, b1, segs[0]) + fwd(0, b0, segs[1]);
  mixed.backward(0, segs[1], nullptr, nullptr);
  l_mixed += fwd(1, b1, segs[1]);
  mixed.backward(1, segs[1], nullptr, nullptr);
  mixed.backward_input(0, segs[0], nullptr, nullptr);
  mixed.backward(1, segs[0], nullptr, nullptr);
  mixed.backward_weight(0, segs[0]);
  EXPECT_NEAR(l_mixed, l_seq, kLossTolerance * l_seq);
  EXPECT_LE(worst_tensor_error(mixed, {seq.gradients().begin(), seq.gradients().end()}),
            kGradientTolerance);
  EXPECT_EQ(mixed.microbatches_in_flight(), 0u);
}

TEST_P(Segments, TwoPipelineStagesWithSegmentsGiveTheWholeModelGradients) {
  const spec::ModelSpec config = tiny();
  const Batch b = random_batch(2, 13, config.vocab, 1);
  const double scale = 1.0 / (b.rows * b.seq);
  MemoryTracker tracker;
  StageModel whole(config, StageSpec::whole_model(config), tracker);
  whole.init_parameters(kSeed);
  const double ref_loss = run_whole_model(whole, 0, b, {{0, 0, 13}}, scale, Backward::kFused);

  StageModel first(config, {0, 1, true, false}, tracker), last(config, {1, 2, false, true}, tracker);
  first.init_parameters(kSeed);
  last.init_parameters(kSeed);
  const auto segs = segments_from_lengths(13, {8, 5});
  double loss = 0;
  std::vector<std::vector<float>> acts;
  for (const Segment& s : segs) {
    const auto tok = columns(b.tokens, b.rows, b.seq, s);
    const auto tgt = columns(b.targets, b.rows, b.seq, s);
    acts.emplace_back(static_cast<std::size_t>(b.rows) * s.length * config.hidden);
    first.forward(0, b.rows, s, nullptr, tok.data(), acts.back().data());
    loss += last.forward_loss(0, b.rows, s, acts.back().data(), nullptr, tgt.data(), scale);
  }
  for (int i = 1; i >= 0; --i) {
    std::vector<float> grad(acts[i].size());
    last.backward_input(0, segs[i], nullptr, grad.data());
    first.backward(0, segs[i], grad.data(), nullptr);
  }
  for (int i = 0; i < 2; ++i) last.backward_weight(0, segs[i]);
  EXPECT_NEAR(loss, ref_loss, kLossTolerance * ref_loss);

  for (const NamedTensor& t : whole.tensors()) {
    std::vector<float> got(t.numel, 0.0f);
    for (StageModel* stage : {&first, &last}) {
      for (const NamedTensor& st : stage->tensors()) {
        if (st.name != t.name) continue;
        // The tied "wte" lives on both stages: its gradient is the sum of the copies'.
        auto g = stage->gradient(st.name);
        for (std::size_t i = 0; i < t.numel; ++i) got[i] += g[i];
      }
    }
    EXPECT_LE(scaled_max_error(got, whole.gradient(t.name)), kGradientTolerance) << t.name;
  }
}

PLAIT_FOR_EVERY_FAMILY(Segments);

}  // namespace
}  // namespace plait::model
