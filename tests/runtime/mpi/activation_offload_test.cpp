// Activation offload in the pipeline (runtime/activation_offload.h, parallel.offload
// "activations"): a unit's saved activations go to the host tier after its F and come back
// before its B. The copies are byte copies, so training with offload gives bitwise the
// parameters of the same plan without it (pp 2: GPipe, Seq1F1B with two segments, LLaMA with
// full recomputation, where only the checkpointed inputs move, and bf16); the first stage's
// measured peak of activations falls, its host tier holds what moved, and both are within 10% of
// the prediction (runtime/predicted_memory.h: the simulator replaying schedule::activation_offloads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_session.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/predicted_memory.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

struct OffloadCase {
  std::string schedule;
  int segments = 1;
  spec::Family family = spec::Family::gpt2;
  spec::Recompute recompute;
  spec::Precision precision = spec::Precision::fp32;
  std::string name() const {
    return schedule + "_k" + std::to_string(segments) + "_" + std::string(spec::family_name(family)) +
           (recompute.any() ? "_recompute" : "") + (precision == spec::Precision::bf16 ? "_bf16" : "");
  }
};

// pp 2 over 4 micro-batches; every rank has a host tier; `offload`: both stages offload their
// activations. `seq`: 16 (the equivalence tests' tiny job) or longer (memory: a unit's
// activations then dwarf the per-layer workspace, as in sharded_memory_test.cpp).
JobConfig job_for(const OffloadCase& c, bool offload, int seq) {
  JobConfig j = test::tiny_job(c.schedule, 2, 1, 4, c.segments, c.family);
  if (seq != 16) {
    j.run.model = test::tiny_job_model(c.family, 4);
    j.run.model.max_seq = seq;
    j.run.train.seq = seq;
  }
  j.run.train.precision = c.precision;
  j.parallel.recompute = c.recompute;
  j.parallel.devices.resize(2);
  for (DeviceEmulation& d : j.parallel.devices) d.host_memory_bytes = std::size_t{1} << 30;
  if (offload) {
    j.parallel.offload = {false};
    j.parallel.offload_activations = {true};
  }
  return j;
}

std::vector<OffloadCase> cases() {
  std::vector<OffloadCase> out = {{"gpipe", 1}, {"seq1f1b", 2}, {"gpipe", 1, spec::Family::llama, spec::Recompute::full()}};
  OffloadCase bf = {"seq1f1b", 2, spec::Family::llama};
  bf.precision = spec::Precision::bf16;
  out.push_back(bf);
  return out;
}

class ActivationOffloadCase : public ::testing::TestWithParam<OffloadCase> {};

TEST_P(ActivationOffloadCase, BitwiseTheParametersOfNoOffload) {
  if (world().size() != 2) GTEST_SKIP() << "needs 2 ranks";
  const OffloadCase& c = GetParam();
  std::vector<std::vector<float>> parameters[2];
  double moved = 0;
  for (bool offload : {false, true}) {
    const JobConfig job = job_for(c, offload, 16);
    const PipelinePlan plan = build_pipeline_plan(job, world().size());
    const TrainConfig t = job.global_train();
    const test::TinyData data(plan.model.vocab);
    const data::BatchLoader loader = data.loader(t);
    MemoryTracker tracker;
    DistributedTrainer trainer(plan, t, world(), tracker);
    for (int s = 0; s < t.steps; ++s) {
      trainer.step(s, loader);
      EXPECT_EQ(tracker.current(MemoryCategory::kActivations), 0u) << "step " << s;
      EXPECT_EQ(trainer.host_tracker().current(MemoryCategory::kActivations), 0u) << "step " << s;
    }
    for (int k = 0; k < trainer.num_chunks(); ++k) {
      const auto p = trainer.chunk(k).parameters();
      parameters[offload].emplace_back(p.begin(), p.end());
    }
    if (offload) moved = trainer.pipeline().activation_offload()->bytes_out();
  }
  EXPECT_GT(moved, 0) << "rank " << world().rank() << ": nothing moved";
  ASSERT_EQ(parameters[0].size(), parameters[1].size());
  for (std::size_t k = 0; k < parameters[0].size(); ++k) {
    ASSERT_EQ(parameters[0][k].size(), parameters[1][k].size());
    EXPECT_EQ(std::memcmp(parameters[0][k].data(), parameters[1][k].data(), parameters[0][k].size() * sizeof(float)), 0)
        << "rank " << world().rank() << ", chunk " << k << ": parameters differ from the run without offload";
  }
}

// The measured peaks (second step) against the same plan without offload and against the
// prediction: activations fall on the first stage and rise nowhere, the host tier holds the moved
// bytes, each within 10% of predicted_memory (exact in every case here).
TEST_P(ActivationOffloadCase, PeakActivationsFallAndMatchThePrediction) {
  if (world().size() != 2) GTEST_SKIP() << "needs 2 ranks";
  const OffloadCase& c = GetParam();
  double peak[2] = {0, 0}, kv[2] = {0, 0}, host_peak = 0, host_kv = 0;
  sim::CategoryPeaks predicted[2];
  for (bool offload : {false, true}) {
    const JobConfig job = job_for(c, offload, 256);
    const PipelinePlan plan = build_pipeline_plan(job, world().size());
    const TrainConfig t = job.global_train();
    const test::TinyData data(plan.model.vocab);
    const data::BatchLoader loader = data.loader(t);
    MemoryTracker tracker, buffers;
    TrainerOptions options;
    options.buffer_tracker = &buffers;
    DistributedTrainer trainer(plan, t, world(), tracker, options);
    trainer.step(0, loader);
    tracker.reset_peaks();
    trainer.host_tracker().reset_peaks();
    trainer.step(1, loader);
    peak[offload] = static_cast<double>(tracker.peak(MemoryCategory::kActivations));
    kv[offload] = static_cast<double>(tracker.peak(MemoryCategory::kKVCache));
    if (offload) {
      host_peak = static_cast<double>(trainer.host_tracker().peak(MemoryCategory::kActivations));
      host_kv = static_cast<double>(trainer.host_tracker().peak(MemoryCategory::kKVCache));
    }
    predicted[offload] = predicted_memory(plan)[static_cast<std::size_t>(world().rank())];
  }
  const std::string where = c.name() + ", rank " + std::to_string(world().rank());
  // The first stage holds the most units in flight: its peak falls. Elsewhere it may be set by a
  // unit that does not move (the last stage's B right after its F), never raised.
  if (world().rank() == 0) {
    EXPECT_LT(peak[1], peak[0]) << where;
  } else {
    EXPECT_LE(peak[1], peak[0]) << where;
  }
  EXPECT_GT(host_peak, 0) << where;
  const auto expect_within = [&](double measured, double want, const std::string& what) {
    EXPECT_LE(std::abs(measured - want), 0.10 * want) << where << ": " << what << " measured " << measured
                                                       << ", predicted " << want;
  };
  for (bool offload : {false, true}) {
    expect_within(peak[offload], predicted[offload].activations, offload ? "activations, offload" : "activations");
    expect_within(kv[offload], predicted[offload].kv_cache, offload ? "kv_cache, offload" : "kv_cache");
  }
  expect_within(host_peak, predicted[1].host_activations, "host activations");
  expect_within(host_kv, predicted[1].host_kv_cache, "host kv_cache");
  std::printf("[ offload  ] %s: activations %.0f -> %.0f B (predicted %.0f -> %.0f), K/V %.0f -> %.0f B (predicted "
              "%.0f -> %.0f), host %.0f + %.0f B (predicted %.0f + %.0f)\n",
              where.c_str(), peak[0], peak[1], predicted[0].activations, predicted[1].activations, kv[0], kv[1],
              predicted[0].kv_cache, predicted[1].kv_cache, host_peak, host_kv, predicted[1].host_activations,
              predicted[1].host_kv_cache);
}

INSTANTIATE_TEST_SUITE_P(PipelineTwo, ActivationOffloadCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<OffloadCase>& info) {
                           std::string n = info.param.name();
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace plait::runtime
