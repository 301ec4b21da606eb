// train.grad_reduce "bf16" (spec/precision_policy.h): data parallelism reduces bf16 gradients.
// A bf16 run with the bf16 reduction against the bf16 single process (runtime::LocalTrainer on
// the global batch), with bounds derived from the reduction's roundings, not measured:
//
// Step 0's reduced gradient. Both runs start from the same weights, so each replica q's local
// gradient g_q (its micro-batches, scaled by 1 / the global batch's tokens) is the single
// process's arithmetic on those micro-batches; the reference g = sum_q g_q up to fp32
// association. The bf16 reduction rounds each g_q to bf16 (at most u |g_q|, u = 2^-8) and each of
// the n - 1 partial sums (at most (u + 2^-24) (1 + u)^(n-1) sum_q |g_q|, comm/bf16_sum.h), so per
// element
//   |g~_i - g_i| <= B_i = (u + (n - 1)(u + 2^-24)(1 + u)^(n-1)) A_i + kTolerance max|g|,
//   A_i = sum_q |g_q,i|,
// the last term the fp32 association the fp32 equivalence tests hold (equivalence_check.h). The
// g_q are computed here: a LocalTrainer over m = M / n micro-batches whose step q reads exactly
// replica q's micro-batches (data::BatchLoader addresses rows by step * m + micro-batch; replica q
// runs global micro-batches q m .. q m + m - 1, schedule/replicate.h), its gradient scaled by
// 1/n (exact: a power of two).
//
// Step 0's update (AdamW, kernels/adamw.h): at t = 1 the update is lr f(c g_i) with
// f(x) = x / (|x| + eps) (m^ = c g, sqrt(v^) = |c g|; c = min(1, clip / ||g||) the clip factor),
// and the decayed part p (1 - lr wd) is the same arithmetic in both runs. f is Lipschitz with
// constant 1 / eps, so
//   |p~_i - p_i| <= lr (c B_i + |c - c~| |g~_i|) / eps + 2^-22 (|p_i| + lr),
// the last term the two runs' fp32 roundings of the update. A wiring error such as a missing
// replica's contribution moves g_i by |g_q,i| >> B_i (2^-7 A_i for two ranks) and breaks both.
//
// Later steps: the weights differ by the above, and every later gradient reads them through the
// bf16 compute copy, which no elementwise bound follows; AdamW caps how far each later step s can
// move the two runs apart: 2 lr_s K_(s+1) per element (adam_update_bound below), so after the
// last step every element is within step 0's bound plus that sum (a cap that holds for any
// gradients: the wiring is what step 0 checks); losses and gradient norms within
// equivalence_check.h's bf16 bound. Every replica of a stage must hold the same bytes (the
// reduction gives every rank the same sum). And the fp32 reduction of the same bf16 layouts still
// equals the single process within equivalence_check.h's bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "equivalence_check.h"
#include "mpi_test_session.h"
#include "plait/runtime/distributed_trainer.h"
#include "plait/model/parameter_layout.h"
#include "plait/runtime/local_trainer.h"
#include "plait/runtime/pipeline_plan.h"
#include "tiny_job.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

constexpr double kUnitRoundoff = 1.0 / 256;  // bf16

struct ReduceCase {
  std::string schedule = "1f1b";
  int pp = 1, dp = 2, segments = 1, level = 0;
  bool offload = false;
  spec::GradReduce reduce = spec::GradReduce::bf16;
  spec::Family family = spec::Family::gpt2;

  int ranks() const { return pp * dp; }
  std::string name() const {
    std::string n = std::string(family == spec::Family::llama ? "llama_" : "gpt2_") + schedule + "_pp" + std::to_string(pp) + "_dp" + std::to_string(dp) + "_shard" +
                    std::to_string(level) + (offload ? "_offload" : "") + "_reduce_" + spec::grad_reduce_name(reduce);
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
  }
  JobConfig job() const {
    JobConfig j = test::tiny_job(schedule, pp, dp, 4, segments, family);
    j.run.train.precision = spec::Precision::bf16;
    j.run.train.grad_reduce = reduce;
    j.parallel.shard = {level};
    j.parallel.offload = {offload};
    j.parallel.devices.resize(static_cast<std::size_t>(ranks()));
    for (DeviceEmulation& d : j.parallel.devices) d.host_memory_bytes = std::size_t{1} << 30;
    return j;
  }
};

ReduceCase make(std::string schedule, int pp, int dp, int level, spec::GradReduce reduce, int segments = 1,
                bool offload = false, spec::Family family = spec::Family::gpt2) {
  ReduceCase c;
  c.family = family;
  c.schedule = std::move(schedule);
  c.pp = pp;
  c.dp = dp;
  c.level = level;
  c.reduce = reduce;
  c.segments = segments;
  c.offload = offload;
  return c;
}

// The replicas' own single-process runs, stepped once each: replica q's step-0 gradient of a tensor
// is its trainer's gradient / dp.
struct ReplicaReferences {
  std::vector<std::unique_ptr<MemoryTracker>> trackers;
  std::vector<std::unique_ptr<LocalTrainer>> trainers;
  int dp = 1;

  ReplicaReferences(const PipelinePlan& plan, const TrainConfig& global, int replicas, const test::TinyData& data)
      : dp(replicas) {
    TrainConfig half = global;
    half.microbatches = global.microbatches / dp;
    const data::BatchLoader loader(data.tokens, half.seq, half.microbatch_size, half.microbatches, 5);
    for (int q = 0; q < dp; ++q) {
      trackers.push_back(std::make_unique<MemoryTracker>());
      trainers.push_back(std::make_unique<LocalTrainer>(plan.model, half, plan.partition, *trackers.back()));
      trainers.back()->step(q, loader);  // step q reads replica q's micro-batches; the gradient precedes the update
    }
  }
  // sum_q |g_q,i| of tensor `name`.
  std::vector<double> magnitudes(const std::string& name) const {
    std::vector<double> out;
    for (const auto& t : trainers) {
      const std::span<const float> g = t->model().gradient(name);
      out.resize(g.size(), 0.0);
      for (std::size_t i = 0; i < g.size(); ++i) out[i] += std::abs(static_cast<double>(g[i])) / dp;
    }
    return out;
  }
};

// sup |m^_t| / sqrt(v^_t) over any gradients g_1..g_t (AdamW at step t, kernels/adamw.h): by
// Cauchy-Schwarz, |sum_k b1^(t-k) g_k| <= sqrt(sum_j (b1^2 / b2)^j) sqrt(sum_k b2^(t-k) g_k^2), so
// K_t = (1 - b1) / (1 - b1^t) sqrt((1 - b2^t) / (1 - b2)) sqrt(sum_{j<t} (b1^2 / b2)^j)
// (1 at t = 1; 1.00 and 1.00 at t = 2, 3 for b1 = 0.9, b2 = 0.95).
double adam_update_bound(const TrainConfig& t, int step) {
  const int n = step + 1;
  double series = 0;
  for (int j = 0; j < n; ++j) series += std::pow(t.beta1 * t.beta1 / t.beta2, j);
  return (1 - t.beta1) / (1 - std::pow(t.beta1, n)) * std::sqrt((1 - std::pow(t.beta2, n)) / (1 - t.beta2)) *
         std::sqrt(series);
}

class GradReduceBf16 : public ::testing::TestWithParam<ReduceCase> {};

// Step 0's derived bounds, elementwise, on the rank's reduced part of every chunk (all of it at
// level 0, its block above; the gradients where the rank keeps them after the step, levels 0-1).
// The tied table split over two stages is left out of the elementwise bounds (its embedding and
// head parts are rounded separately on their stages, which the replica references cannot
// separate); it is in the later check. After the last step: every element within step 0's bound
// plus, per later step s, the two runs' updates apart by at most 2 lr_s K_(s+1) (weight decay
// multiplies an earlier difference by 1 - lr wd < 1) — a cap on how far AdamW carries step 0's
// difference, which holds for any gradients; the wiring is what step 0 checks.
TEST_P(GradReduceBf16, WithinTheRoundingBoundsOfTheBf16SingleProcess) {
  const ReduceCase& c = GetParam();
  if (c.ranks() != world().size()) GTEST_SKIP() << "needs " << c.ranks() << " ranks";
  const JobConfig job = c.job();
  const PipelinePlan plan = build_pipeline_plan(job, world().size());
  const TrainConfig global = job.global_train();
  const test::TinyData data(plan.model.vocab);
  const data::BatchLoader loader = data.loader(global);
  MemoryTracker tracker, ref_tracker;
  DistributedTrainer trainer(plan, global, world(), tracker);
  LocalTrainer reference(plan.model, global, plan.partition, ref_tracker);
  const int n = c.dp;
  const double partial = (n - 1) * (kUnitRoundoff + std::ldexp(1.0, -24)) * std::pow(1 + kUnitRoundoff, n - 1);
  const double per_magnitude = kUnitRoundoff + partial;
  const std::string tied = plan.tied_table_split() ? model::embedding_tensor_name(plan.model) : "";
  const ReplicaReferences replicas(plan, global, n, data);

  const DistributedStepResult got = trainer.step(0, loader);
  const StepResult want = reference.step(0, loader);
  EXPECT_NEAR(got.loss, want.loss, test::kTolerance * want.loss);  // the forward is the same arithmetic
  const double clip = global.grad_clip;
  const double c_want = clip > 0 ? std::min(1.0, clip / want.grad_norm) : 1.0;
  const double c_got = clip > 0 ? std::min(1.0, clip / got.grad_norm) : 1.0;
  std::vector<std::vector<float>> params = trainer.gather_parameters();
  // Per chunk, per element of the rank's part: step 0's bound on the parameter (-1: unchecked).
  std::vector<std::vector<double>> p_bounds(static_cast<std::size_t>(trainer.num_chunks()));
  double worst_gradient = 0, worst_parameter = 0;  // error / bound, for the message
  std::size_t checked = 0;
  for (int k = 0; k < trainer.num_chunks(); ++k) {
    const ShardedChunk& chunk = trainer.data_parallel().chunk(k);
    model::StageModel& m = trainer.chunk(k);
    const auto b = static_cast<std::size_t>(chunk.shard_begin()), e = static_cast<std::size_t>(chunk.shard_end());
    const bool kept = chunk.policy().level <= 1;  // levels 2-3 release the gradients after the step
    std::vector<double>& p_bound = p_bounds[static_cast<std::size_t>(k)];
    p_bound.assign(e - b, -1.0);
    for (const model::NamedTensor& t : m.tensors()) {
      const std::size_t lo = std::max(t.offset, b), hi = std::min(t.offset + t.numel, e);
      if (lo >= hi || t.name == tied) continue;
      const std::vector<double> magnitude_of = replicas.magnitudes(t.name);
      const std::span<const float> g = reference.model().gradient(t.name);
      const std::span<const float> p = reference.model().parameter(t.name);
      double scale = 0;
      for (float v : g) scale = std::max(scale, std::abs(static_cast<double>(v)));
      for (std::size_t x = lo; x < hi; ++x) {
        const std::size_t i = x - t.offset;
        const double bound = per_magnitude * magnitude_of[i] + test::kTolerance * scale;
        double g_got = std::abs(g[i]) + bound;  // at most, where the rank no longer holds it
        if (kept) {
          const double g_err = std::abs(m.gradients()[x] - g[i]);
          ASSERT_LE(g_err, bound) << t.name << "[" << i << "] on rank " << trainer.rank() << ": gradient "
                                  << m.gradients()[x] << ", single process " << g[i];
          worst_gradient = std::max(worst_gradient, g_err / bound);
          g_got = std::abs(m.gradients()[x]);
        }
        const double pb = want.lr * (c_want * bound + std::abs(c_want - c_got) * g_got) / global.eps +
                          std::ldexp(std::abs(p[i]) + want.lr, -22);
        const double p_err = std::abs(static_cast<double>(params[static_cast<std::size_t>(k)][x]) - p[i]);
        ASSERT_LE(p_err, pb) << t.name << "[" << i << "] on rank " << trainer.rank() << " after step 0";
        worst_parameter = std::max(worst_parameter, p_err / pb);
        p_bound[x - b] = pb;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0u);
  std::printf("rank %d (%s): step 0, %zu elements: worst gradient error %.3f of its bound, parameter %.3f\n",
              trainer.rank(), c.name().c_str(), checked, worst_gradient, worst_parameter);

  double later = 0;  // sum over later steps of 2 lr_s K_(s+1)
  for (int s = 1; s < global.steps; ++s) {
    const DistributedStepResult step = trainer.step(s, loader);
    const StepResult ref = reference.step(s, loader);
    EXPECT_NEAR(step.loss, ref.loss, test::kBf16Tolerance * ref.loss) << "step " << s;
    EXPECT_NEAR(step.grad_norm, ref.grad_norm, test::kBf16Tolerance * ref.grad_norm) << "step " << s;
    later += 2 * ref.lr * adam_update_bound(global, s);
  }
  params = trainer.gather_parameters();
  double worst_final = 0;
  for (int k = 0; k < trainer.num_chunks(); ++k) {
    const ShardedChunk& chunk = trainer.data_parallel().chunk(k);
    const auto b = static_cast<std::size_t>(chunk.shard_begin());
    for (const model::NamedTensor& t : trainer.chunk(k).tensors()) {
      const std::span<const float> p = reference.model().parameter(t.name);
      for (std::size_t i = 0; i < t.numel; ++i) {
        const std::size_t x = t.offset + i;
        if (x < b || x - b >= p_bounds[static_cast<std::size_t>(k)].size()) continue;
        const double p0 = p_bounds[static_cast<std::size_t>(k)][x - b];
        if (p0 < 0) continue;
        const double bound = p0 + later + std::ldexp(std::abs(p[i]) + global.lr, -22) * global.steps;
        const double err = std::abs(static_cast<double>(params[static_cast<std::size_t>(k)][x]) - p[i]);
        ASSERT_LE(err, bound) << t.name << "[" << i << "] on rank " << trainer.rank() << " after the last step";
        worst_final = std::max(worst_final, err / bound);
      }
    }
  }
  std::printf("rank %d (%s): after step %d: worst parameter error %.3f of its bound\n", trainer.rank(), c.name().c_str(),
              global.steps - 1, worst_final);
  // Every replica of a stage holds the same bytes (the reduction gives each rank the same sum):
  // compared within each stage's group through the world (pp ranks apart).
  for (int k = 0; k < trainer.num_chunks(); ++k) {
    std::vector<float> mine = params[static_cast<std::size_t>(k)];
    std::vector<float> first = mine;
    comm::Communicator* group = trainer.data_parallel().group(k);
    if (group == nullptr) continue;
    group->broadcast(std::span<float>(first), 0);
    EXPECT_EQ(std::memcmp(first.data(), mine.data(), mine.size() * sizeof(float)), 0)
        << "rank " << trainer.rank() << "'s chunk " << k << " differs from its stage's first holder's";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, GradReduceBf16,
                         ::testing::Values(make("1f1b", 1, 2, 0, spec::GradReduce::bf16),
                                           make("1f1b", 1, 2, 1, spec::GradReduce::bf16),
                                           make("1f1b", 1, 4, 0, spec::GradReduce::bf16),
                                           make("1f1b", 1, 4, 1, spec::GradReduce::bf16),
                                           make("seq1f1b", 2, 2, 0, spec::GradReduce::bf16, 2),
                                           make("seq1f1b", 2, 2, 2, spec::GradReduce::bf16, 2),
                                           make("zb-v", 2, 2, 3, spec::GradReduce::bf16, 1, true),
                                           // LLaMA: GQA, SwiGLU, untied head (no tied table to reduce)
                                           make("1f1b", 1, 2, 1, spec::GradReduce::bf16, 1, false, spec::Family::llama),
                                           make("seq1f1b", 2, 2, 2, spec::GradReduce::bf16, 2, false, spec::Family::llama)),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) { return info.param.name(); });

// The fp32 reduction of the same bf16 layouts still equals the single process within
// equivalence_check.h's bounds, as before.
class GradReduceFp32 : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(GradReduceFp32, MatchesOneProcessAfterThreeSteps) {
  const ReduceCase& c = GetParam();
  if (c.ranks() != world().size()) GTEST_SKIP() << "needs " << c.ranks() << " ranks";
  const JobConfig job = c.job();
  test::expect_equivalent(build_pipeline_plan(job, world().size()), job.global_train());
}

INSTANTIATE_TEST_SUITE_P(Layouts, GradReduceFp32,
                         ::testing::Values(make("1f1b", 1, 2, 0, spec::GradReduce::fp32),
                                           make("1f1b", 1, 2, 1, spec::GradReduce::fp32),
                                           make("seq1f1b", 2, 2, 0, spec::GradReduce::fp32, 2),
                                           make("zb-v", 2, 2, 3, spec::GradReduce::fp32, 1, true),
                                           make("seq1f1b", 2, 2, 2, spec::GradReduce::fp32, 2, false, spec::Family::llama)),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) { return info.param.name(); });

}  // namespace
}  // namespace plait::runtime
