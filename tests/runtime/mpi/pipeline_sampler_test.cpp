// Samples while training (runtime/pipeline_sampler.h), decoded through the pipeline: the tokens
// equal those a single process generates (runtime/generation.h) from the same weights, read back
// from a checkpoint of the run; and a run that samples trains bit-identically to one that does
// not. Layouts: a pipeline over every rank (gpt2, tied head split over the first and last
// stage), ZB-V's two chunks per rank with data parallelism (llama), and ZeRO level 3 in bf16
// (llama: the weights live as shards between steps).
#include <gtest/gtest.h>

#include <cstring>

#include "mpi_test_session.h"
#include "plait/checkpoint/checkpoint_store.h"
#include "plait/runtime/generation.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/pipeline_sampler.h"
#include "plait/runtime/training_checkpoint.h"
#include "plait/runtime/training_run.h"
#include "shared_dir.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

struct SampleCase {
  std::string schedule;
  int pp = 0, dp = 1, level = 0;
  spec::Family family = spec::Family::gpt2;
  spec::Precision precision = spec::Precision::fp32;
  std::string name() const {
    // pp 0: every rank; dp 0: the ranks left (the world size decides).
    const auto count = [](int k) { return k == 0 ? std::string("N") : std::to_string(k); };
    return (schedule == "zb-v" ? std::string("zbv") : schedule) + "_pp" + count(pp) + "_dp" + count(dp) + "_level" +
           std::to_string(level) + (precision == spec::Precision::bf16 ? "_bf16" : "");
  }
};

class PipelineSample : public ::testing::TestWithParam<SampleCase> {};

TEST_P(PipelineSample, EqualsOneProcessAndChangesNoTrainingStep) {
  const int n = world().size();
  SampleCase c = GetParam();
  if (c.pp == 0) c.pp = n;
  if (c.dp == 0) c.dp = n / c.pp;
  if (c.pp * c.dp != n || (c.level > 0 && c.dp < 2)) GTEST_SKIP() << "needs another world size";
  JobConfig job = test::tiny_job(c.schedule, c.pp, c.dp, 2, 1, c.family);
  job.run.train.precision = c.precision;
  if (c.level > 0) job.parallel.shard = {c.level};
  const PipelinePlan plan = build_pipeline_plan(job, n);
  const TrainConfig global = job.global_train();
  const test::TinyData data(plan.model.vocab);
  const data::BatchLoader loader = data.loader(global);
  MemoryTracker tracker_a, tracker_b;
  DistributedTrainer sampled(plan, global, world(), tracker_a), plain(plan, global, world(), tracker_b);
  const std::vector<std::int32_t> prompt = {10, 3};
  SamplingOptions options;
  options.temperature = 0.9;
  options.top_k = 40;
  options.seed = 99;
  std::vector<std::int32_t> tokens;
  test::SharedDir dir("sampler_" + c.name());
  for (int s = 0; s < 3; ++s) {
    const DistributedStepResult a = sampled.step(s, loader);
    const DistributedStepResult b = plain.step(s, loader);
    EXPECT_EQ(a.loss, b.loss) << "step " << s;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << s;
    if (s == 1) {
      tokens = sample_through_pipeline(sampled, world(), tracker_a, prompt, 20, options);
      // The reference: one process decoding the whole model, from a checkpoint of these weights.
      CheckpointConfig where;
      where.dir = dir / "ckpt";
      TrainingState state;
      state.step = 2;
      state.config = TrainingRun::config_json(job);
      state.data_position = nlohmann::json::object();
      state.rng_state = nlohmann::json::object();
      const std::string saved = save_training_checkpoint(plain, world(), where, state);
      const checkpoint::CheckpointReader reader(saved);
      MemoryTracker t;
      model::StageModel whole(plan.model, model::StageSpec::whole_model(plan.model), t);
      for (const model::NamedTensor& x : whole.tensors()) reader.read(x.name, whole.parameters().subspan(x.offset, x.numel));
      const runtime::Generation want = generate(whole, prompt, 20, options, true);
      EXPECT_EQ(tokens, want.tokens) << "rank " << world().rank();
      EXPECT_EQ(tracker_a.current(MemoryCategory::kKVCache), 0u);  // the decoders are gone
    }
  }
  ASSERT_EQ(tokens.size(), 20u);
  const std::vector<std::vector<float>> pa = sampled.gather_parameters(), pb = plain.gather_parameters();
  for (std::size_t k = 0; k < pa.size(); ++k) {
    ASSERT_EQ(pa[k].size(), pb[k].size());
    EXPECT_EQ(0, std::memcmp(pa[k].data(), pb[k].data(), pa[k].size() * sizeof(float))) << "chunk " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineSample,
                         ::testing::Values(SampleCase{"1f1b", 0, 1, 0, spec::Family::gpt2},
                                           SampleCase{"zb-v", 2, 0, 0, spec::Family::llama},
                                           SampleCase{"1f1b", 2, 0, 3, spec::Family::llama, spec::Precision::bf16}),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace plait::runtime
