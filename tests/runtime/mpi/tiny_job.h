#pragma once
// A tiny job for the multi-rank runtime tests: an 8-layer, 32-wide model of either family on
// 16-token sequences (so a step takes milliseconds even with 8 ranks on 2 cores), random tokens,
// and the single-process reference (runtime::LocalTrainer) on the same global batch.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "plait/data/batch_loader.h"
#include "plait/runtime/parallel_config.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/schedule/schedule_family.h"

namespace plait::runtime::test {

// gpt2: 4 heads, tied head; llama: 4 query heads sharing 2 K/V heads, SwiGLU of 48, untied head.
inline spec::ModelSpec tiny_job_model(spec::Family family, int layers = 8) {
  spec::ModelSpec m = spec::gpt2_model(layers, 32, 4, 64, 32);
  if (family == spec::Family::llama) {
    m.family = family;
    m.kv_heads = 2;
    m.ffn_hidden = 48;
    m.tie_embeddings = false;
  }
  return m;
}

inline JobConfig tiny_job(const std::string& schedule, int pp, int dp, int microbatches,
                          int segments, spec::Family family = spec::Family::gpt2) {
  JobConfig job;
  job.run.source = "tiny-job";
  job.run.model = tiny_job_model(family);
  TrainConfig& t = job.run.train;
  t.steps = 3;
  t.seq = 16;
  t.microbatch_size = 2;
  t.microbatches = microbatches;
  t.lr = 1e-2;
  t.min_lr = 1e-3;
  t.warmup_steps = 1;
  t.weight_decay = 0.1;
  t.grad_clip = 1.0;
  t.seed = 7;
  t.eps = 1e-3;  // why: equivalence_test.cpp's header
  t.segments.count = segments;
  job.parallel.schedule = schedule;
  job.parallel.pp = pp;
  job.parallel.dp = dp;
  return job;
}

// The family's heterogeneous schedule as the planner builds it (schedule/heterogeneous_pipeline.h):
// Zorse-style stage groups of widths 2, 1, 1 on 4 ranks, rank 1 twice as slow and running 2 of
// the 5 micro-batches, routing many-to-many; written as the explicit form.
inline JobConfig heterogeneous_job(const std::string& family, spec::Family model_family) {
  const schedule::ScheduleFamily* f = schedule::find_schedule_family(family);
  schedule::HeterogeneousPipeline pipeline;
  pipeline.stage_ranks = {{0, 1}, {2}, {3}};
  pipeline.stage_counts = {{3, 2}, {5}, {5}};
  pipeline.num_microbatches = 5;
  pipeline.num_segments = f->sequence_level ? 2 : 1;
  pipeline.chunks = f->fixed_chunks == 1 ? 1 : 2;
  schedule::HeterogeneousCosts costs;
  costs.unit_seconds = [](int rank, schedule::ActionKind, std::int32_t, std::int32_t) {
    return rank == 1 ? 2.0 : 1.0;
  };
  const schedule::Schedule s = schedule::heterogeneous_schedule(family, pipeline, costs);
  JobConfig job = tiny_job(family, 1, 1, 5, pipeline.num_segments, model_family);
  job.parallel.form = ParallelConfig::Form::explicit_layout;
  job.parallel.schedule_name = family + " (heterogeneous)";
  job.parallel.layers.assign(static_cast<std::size_t>(s.layout.num_vstages), 0);
  for (int l = 0; l < job.run.model.layers; ++l) ++job.parallel.layers[l % s.layout.num_vstages];
  for (int r = 0; r < s.num_ranks(); ++r) {
    job.parallel.rank_vstages.emplace_back(s.layout.rank_vstages[r].begin(), s.layout.rank_vstages[r].end());
    std::string text;
    for (const schedule::Action& a : s.ranks[r]) {
      text += (text.empty() ? "" : " ") + schedule::to_string(a, s.layout.max_chunks() > 1);
    }
    job.parallel.schedule_text.push_back(text.empty() ? "-" : text);
  }
  job.parallel.devices = {DeviceEmulation{}, DeviceEmulation{"slow", 2.0, {}, {}, {}}, DeviceEmulation{}, DeviceEmulation{}};
  return job;
}

// A random token stream and a loader over it for `microbatches` global micro-batches per step.
struct TinyData {
  explicit TinyData(int vocab, std::uint64_t seed = 11) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> dist(0, vocab - 1);
    tokens.resize(4096);
    for (auto& t : tokens) t = static_cast<std::uint16_t>(dist(rng));
  }
  data::BatchLoader loader(const TrainConfig& global) const {
    return data::BatchLoader(tokens, global.seq, global.microbatch_size, global.microbatches, 5);
  }
  std::vector<std::uint16_t> tokens;
};

}  // namespace plait::runtime::test
