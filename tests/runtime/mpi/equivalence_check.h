#pragma once
// The equivalence check of the multi-rank runtime tests (ARCHITECTURE.md invariant 3; metric and
// tolerance explained in equivalence_test.cpp's header): a plan run for train.steps steps on
// every rank against runtime::LocalTrainer on the same global batch — loss, gradient norm and
// learning rate of every step, the reduced gradients where a stage keeps them whole after the
// step (level 0; at level 1 the rank's own reduced block; levels 2-3 release them), and every
// parameter tensor after the last step, gathered from the shards where they are sharded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mpi_test_session.h"
#include "plait/model/tensor_shard_copy.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/runtime/local_trainer.h"
#include "plait/runtime/pipeline_plan.h"
#include "tiny_job.h"

namespace plait::runtime::test {

inline constexpr double kTolerance = 1e-5;
// bf16 against the bf16 single process: each stage runs the single process's kernels on the
// same bf16 inputs, so a step's activations are the same arithmetic; the fp32 weight gradients
// differ by their summation order only (micro-batches, data-parallel replicas), as in fp32. But
// an update that moves a master weight across a bf16 rounding boundary in one run and not in the
// other changes that compute weight by one bf16 ulp (2^-8 ~ 3.9e-3 relative), and every later
// gradient that reads it sees that. So the bound is a few bf16 ulps of a tensor's scale, 2e-2
// (~5 ulps); measured worst 5.4e-3 (gpt2 seq1f1b pp2 x dp2, 4 segments, step 2), and 2-rank
// layouts without data parallelism stay below 1e-3.
inline constexpr double kBf16Tolerance = 2e-2;
inline double tolerance(spec::Precision p) { return p == spec::Precision::bf16 ? kBf16Tolerance : kTolerance; }
// Tensor parallelism reassociates inside every layer (a row-parallel output and a
// column-parallel input gradient are sums of the ranks' partial products; the cross-entropy's
// normaliser a sum of the ranks' parts), not only the gradient sums as data parallelism does:
// in fp32 the first step's gradients differ by ~1e-6 of a tensor's scale (measured worst 7.9e-7,
// within kTolerance), and by step 2 LLaMA's q/k projection gradients, the most sensitive (their
// gradients pass through the softmax of q.k), amplify that to 3.2e-5 (TP 2 x DP 2, 2 segments);
// other tensors stay below 7e-6. So from the second step on the fp32 TP bound is 1e-4.
inline constexpr double kTensorParallelTolerance = 1e-4;
// bf16 with tensor parallelism: here the activations are NOT the single process's arithmetic.
// A column-parallel linear's input gradient is the sum of its GEMMs' fp32 partial products over
// the group, rounded once, where the single process rounds the first GEMM's result to bf16 and
// adds the second into it (two roundings: d_norm1 of every layer differs by up to one bf16
// rounding, 2^-9 relative), and the other bf16 tensors round fp32 values associated differently
// (GEMMs of other widths, partial sums over ranks), so an element near a rounding boundary lands
// on the other neighbour. The first step's gradients (same weights) stay within kBf16Tolerance
// (measured worst 7.4e-3: a norm's weight gradient); from then on the two runs' bf16 compute
// weights differ by such roundings and each step compounds them: gradients of steps 1-2 and the
// parameters after 3 steps within 8e-2 (measured worst 5.7e-2 and 3.3e-2, gpt2 and llama, TP 2
// alone and x PP 2 with 4 segments). A wiring error (a missing reduction, a wrong shard, a
// doubled replicated gradient) is O(1); the fp32 TP cases hold 1e-5.
inline constexpr double kBf16TensorParallelTolerance = 8e-2;
// bf16 without tensor parallelism, gradients from the second step on: the first steps'
// gradients agree to ~2e-7 (same arithmetic, fp32 sums reassociated), but once an update has
// moved a master weight across a bf16 rounding boundary in one run only, the two runs compute
// with weights one bf16 ulp apart, and the gradient of a q/k projection reads that through the
// softmax of q.k, whose probabilities shift by a multiple of the score change. Which weights
// cross depends on the fp32 rounding of the sums, so on the compiler too: gpt2 seq1f1b pp2 x dp2
// at shard level 1, step 2, measured worst 4.0e-3 in the Release build and 2.6e-2
// (h.6.attn.c_attn.weight) in the sanitizer build (RelWithDebInfo, same inputs, steps 0-1 at
// 2e-7 in both). That is the TP bf16 mechanism without its per-layer roundings, so the same
// bound, 8e-2, for gradients; the parameters after the steps keep kBf16Tolerance (Adam's update
// is lr-scaled: measured worst 3.4e-4), and a wiring error is O(1) at every step.
inline double later_tolerance(spec::Precision p, int tp) {
  if (p == spec::Precision::bf16) return kBf16TensorParallelTolerance;
  return tp == 1 ? kTolerance : kTensorParallelTolerance;
}
inline double parameter_tolerance(spec::Precision p, int tp) {
  return tp == 1 ? tolerance(p) : later_tolerance(p, tp);
}

// Under TP every rank of a group holds the replicated tensors (norms, row-parallel biases, the
// position table) whole, updated by each rank from the same gradient: they must stay bitwise
// equal across the group (a divergence would make the ranks compute with different weights).
inline void expect_replicas_equal(DistributedTrainer& trainer) {
  comm::Communicator* group = trainer.tp_communicator();
  if (group == nullptr) return;
  std::vector<float> mine;
  const std::vector<std::vector<float>> full = trainer.gather_parameters();  // (sharded: gathered)
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    for (const model::NamedTensor& t : trainer.chunk(c).tensors()) {
      if (!t.tp_replicated) continue;
      const auto p = std::span<const float>(full[static_cast<std::size_t>(c)]).subspan(t.offset, t.numel);
      mine.insert(mine.end(), p.begin(), p.end());
    }
  }
  std::vector<float> first = mine;
  group->broadcast(std::span<float>(first), 0);
  EXPECT_EQ(std::memcmp(first.data(), mine.data(), mine.size() * sizeof(float)), 0)
      << "rank " << trainer.rank() << " TP rank " << trainer.tp_rank() << ": replicated tensors differ from TP rank 0's";
}

// What a rank holds of the reference's whole tensor: all of it, or under tensor parallelism its
// part (model/tensor_shard_copy.h; the vocabulary's padding rows zero, as the rank's are).
inline std::vector<float> reference_part(const model::NamedTensor& t, std::span<const float> whole) {
  if (t.shard.dim < 0) return {whole.begin(), whole.end()};
  std::vector<float> part(t.numel);
  model::copy_shard_out(whole, t, part);
  return part;
}

// max_i |got_i - want_i| / max_i |want_i| over one tensor.
inline double tensor_error(std::span<const float> got, std::span<const float> want) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

// The worst tensor_error of the reduced gradients the rank keeps after the step, and its name.
inline std::pair<double, std::string> worst_gradient(DistributedTrainer& trainer, LocalTrainer& reference) {
  std::pair<double, std::string> worst{0.0, ""};
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    const ShardedChunk& chunk = trainer.data_parallel().chunk(c);
    if (chunk.policy().level > 1) continue;
    model::StageModel& m = trainer.chunk(c);
    const auto b = static_cast<std::size_t>(chunk.shard_begin()), e = static_cast<std::size_t>(chunk.shard_end());
    for (const model::NamedTensor& t : m.tensors()) {
      // The part of the tensor in the rank's reduced range (all of it at level 0).
      const std::size_t lo = std::max(t.offset, b), hi = std::min(t.offset + t.numel, e);
      if (lo >= hi) continue;
      const std::vector<float> want = reference_part(t, reference.model().gradient(t.name));
      const double err = tensor_error(m.gradients().subspan(lo, hi - lo),
                                      std::span<const float>(want).subspan(lo - t.offset, hi - lo));
      if (err > worst.first) worst = {err, t.name};
    }
  }
  return worst;
}

// The worst tensor_error of the parameters (gathered: collective over the stage groups).
inline std::pair<double, std::string> worst_parameter(DistributedTrainer& trainer, LocalTrainer& reference) {
  std::pair<double, std::string> worst{0.0, ""};
  const std::vector<std::vector<float>> full = trainer.gather_parameters();
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    const std::span<const float> p = full[static_cast<std::size_t>(c)];
    for (const model::NamedTensor& t : trainer.chunk(c).tensors()) {
      const double err =
          tensor_error(p.subspan(t.offset, t.numel), reference_part(t, reference.model().parameter(t.name)));
      if (err > worst.first) worst = {err, t.name};
    }
  }
  return worst;
}

// Runs `plan` for global.steps steps on every rank and checks it against the single-process
// reference, both reading `loader`; returns the rank's parameters after the steps (gathered where
// sharded), chunk after chunk. `check` (optional) runs before the first step and after every step
// with the rank's trainer and device tracker.
template <typename Check>
std::vector<float> expect_equivalent_on(const PipelinePlan& plan, const TrainConfig& global,
                                        const data::BatchSource& loader, Check&& check) {
  comm::Communicator& w = plait::test::mpi_session().world();
  const double first_tol = tolerance(global.precision);
  const double later_tol = later_tolerance(global.precision, plan.max_tensor_parallel());
  const double parameter_tol = parameter_tolerance(global.precision, plan.max_tensor_parallel());
  MemoryTracker tracker, ref_tracker;
  DistributedTrainer trainer(plan, global, w, tracker);
  LocalTrainer reference(plan.model, global, plan.partition, ref_tracker);
  check(trainer, tracker);  // as built, before any step
  for (int s = 0; s < global.steps; ++s) {
    const double tol = s == 0 ? first_tol : later_tol;
    const DistributedStepResult got = trainer.step(s, loader);
    const StepResult want = reference.step(s, loader);
    EXPECT_NEAR(got.loss, want.loss, tol * want.loss) << "step " << s;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, tol * want.grad_norm) << "step " << s;
    EXPECT_DOUBLE_EQ(got.lr, want.lr) << "step " << s;
    // Every unit's activations and K/V were freed by its last use.
    EXPECT_EQ(tracker.current(MemoryCategory::kActivations), 0u) << "step " << s;
    EXPECT_EQ(tracker.current(MemoryCategory::kKVCache), 0u) << "step " << s;
    const auto [error, name] = worst_gradient(trainer, reference);
    EXPECT_LE(error, tol) << "rank " << trainer.rank() << ", step " << s << ": worst gradient " << name;
    check(trainer, tracker);
  }
  const auto [error, name] = worst_parameter(trainer, reference);
  EXPECT_LE(error, parameter_tol) << "rank " << trainer.rank() << ": worst tensor " << name;
  std::printf("[ measured ] rank %d: worst parameter error after %d steps %.2e (%s)\n", trainer.rank(),
              global.steps, error, name.c_str());
  expect_replicas_equal(trainer);
  std::vector<float> parameters;
  for (const std::vector<float>& p : trainer.gather_parameters()) parameters.insert(parameters.end(), p.begin(), p.end());
  return parameters;
}

// The same on TinyData's random windows.
template <typename Check>
std::vector<float> expect_equivalent(const PipelinePlan& plan, const TrainConfig& global, Check&& check) {
  const TinyData data(plan.model.vocab);
  const data::BatchLoader loader = data.loader(global);
  return expect_equivalent_on(plan, global, loader, check);
}

inline std::vector<float> expect_equivalent(const PipelinePlan& plan, const TrainConfig& global) {
  return expect_equivalent(plan, global, [](DistributedTrainer&, MemoryTracker&) {});
}

}  // namespace plait::runtime::test
