#include "plait/runtime/local_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include "runtime/mpi/tiny_job.h"

namespace plait::runtime {
namespace {

// The same random micro-batches every step (so a model can memorise them), or a fixed set of
// rows split into micro-batches however the trainer asks.
class FixedBatches : public data::BatchSource {
 public:
  FixedBatches(int rows_total, int seq, int microbatch_size, int vocab, std::uint64_t seed)
      : seq_(seq), rows_(microbatch_size), count_(rows_total / microbatch_size) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> dist(0, vocab - 1);
    tokens_.resize(static_cast<std::size_t>(rows_total) * (seq + 1));
    for (auto& t : tokens_) t = dist(rng);
  }
  void fill(std::int64_t, int mb, std::int32_t* inputs, std::int32_t* targets) const override {
    for (int r = 0; r < rows_; ++r) {
      const std::int32_t* row = tokens_.data() + static_cast<std::size_t>(mb * rows_ + r) * (seq_ + 1);
      for (int t = 0; t < seq_; ++t) {
        inputs[r * seq_ + t] = row[t];
        targets[r * seq_ + t] = row[t + 1];
      }
    }
  }
  int seq() const override { return seq_; }
  int microbatch_size() const override { return rows_; }
  int microbatches_per_step() const override { return count_; }

 private:
  int seq_, rows_, count_;
  std::vector<std::int32_t> tokens_;
};

// Two layers of the runtime tests' tiny model (mpi/tiny_job.h).
spec::ModelSpec tiny(spec::Family family = spec::Family::gpt2) { return test::tiny_job_model(family, 2); }

// The partition a train config asks for.
spec::SequencePartition partition(const spec::ModelSpec& m, const TrainConfig& t) {
  return spec::cut_sequence(m, t.seq, t.segments);
}

class OverfitTest : public ::testing::TestWithParam<spec::Family> {};

TrainConfig train(int steps, int seq, int rows, int microbatches) {
  TrainConfig t;
  t.steps = steps;
  t.seq = seq;
  t.microbatch_size = rows;
  t.microbatches = microbatches;
  t.lr = 1e-2;
  t.min_lr = 1e-3;
  t.warmup_steps = 5;
  t.weight_decay = 0.0;
  t.seed = 3;
  return t;
}

TEST_P(OverfitTest, ATinyModelOverfitsOneFixedBatch) {
  MemoryTracker tracker;
  const TrainConfig t = train(150, 16, 4, 1);
  const spec::ModelSpec m = tiny(GetParam());
  LocalTrainer trainer(m, t, partition(m, t), tracker);
  const FixedBatches batches(4, 16, 4, 64, 1);
  const double first = trainer.step(0, batches).loss;
  EXPECT_NEAR(first, std::log(64.0), 0.2);  // a fresh model predicts ~uniformly
  double last = first;
  for (int s = 1; s < t.steps; ++s) last = trainer.step(s, batches).loss;
  // 64 random tokens memorised: the loss falls far below what any generalisation could give.
  EXPECT_LT(last, 0.05) << "first " << first;
}

INSTANTIATE_TEST_SUITE_P(Families, OverfitTest,
                         ::testing::Values(spec::Family::gpt2, spec::Family::llama),
                         [](const auto& info) { return std::string(spec::family_name(info.param)); });

TEST(LocalTrainer, MicrobatchesAndSegmentsDoNotChangeTheStep) {
  // The same 4 rows as 1 micro-batch of 4, as 2 of 2, and as 2 of 2 cut into 3 segments:
  // the same loss and, after 3 steps, the same parameters (up to fp32 reassociation).
  auto run = [](int rows, int microbatches, std::vector<std::int64_t> segments) {
    MemoryTracker tracker;
    TrainConfig t = train(3, 12, rows, microbatches);
    t.segments.lengths = std::move(segments);
    LocalTrainer trainer(tiny(), t, partition(tiny(), t), tracker);
    const FixedBatches batches(4, 12, rows, 64, 2);
    std::vector<double> losses;
    for (int s = 0; s < 3; ++s) losses.push_back(trainer.step(s, batches).loss);
    auto p = trainer.model().parameters();
    return std::make_pair(losses, std::vector<float>(p.begin(), p.end()));
  };
  const auto whole = run(4, 1, {});
  const auto accumulated = run(2, 2, {});
  const auto segmented = run(2, 2, {5, 4, 3});
  for (const auto* other : {&accumulated, &segmented}) {
    for (int s = 0; s < 3; ++s) EXPECT_NEAR(other->first[s], whole.first[s], 1e-6 * whole.first[s]);
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < whole.second.size(); ++i) {
      err = std::max(err, std::abs(double(other->second[i]) - whole.second[i]));
      scale = std::max(scale, std::abs(double(whole.second[i])));
    }
    EXPECT_LT(err / scale, 1e-5);
  }
}

TEST(LocalTrainer, ClipsByTheGlobalNormAndFollowsTheSchedule) {
  MemoryTracker tracker;
  TrainConfig t = train(10, 8, 2, 1);
  t.grad_clip = 1e-3;  // far below the norm: always clips
  LocalTrainer trainer(tiny(), t, partition(tiny(), t), tracker);
  const FixedBatches batches(2, 8, 2, 64, 1);
  const StepResult r = trainer.step(0, batches);
  EXPECT_GT(r.grad_norm, 1e-3);
  EXPECT_NEAR(r.clip_factor * r.grad_norm, 1e-3, 1e-8);
  EXPECT_DOUBLE_EQ(r.lr, t.lr / t.warmup_steps);
  EXPECT_EQ(trainer.optimizer().steps_taken(), 1);
}

}  // namespace
}  // namespace plait::runtime
