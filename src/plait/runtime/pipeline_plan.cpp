#include "plait/runtime/pipeline_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/validator.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::runtime {
namespace {

std::string where(const JobConfig& job, const std::string& field) {
  return job.run.source + ": parallel." + field;
}

// Layers per virtual stage as even as possible, the first L % V stages taking one more
// (the simulator's split_layers, so simulated and run layouts agree).
std::vector<int> even_layers(const JobConfig& job, int vstages) {
  const int layers = job.run.model.layers;
  if (layers < vstages) {
    throw Error(where(job, "layers") + ": cannot place " + std::to_string(layers) +
                " layers on " + std::to_string(vstages) +
                " virtual stages (each needs at least one); lower pp or chunks");
  }
  std::vector<int> split(static_cast<std::size_t>(vstages), layers / vstages);
  for (int s = 0; s < layers % vstages; ++s) ++split[static_cast<std::size_t>(s)];
  return split;
}

}  // namespace

std::vector<int> PipelinePlan::holders(int vstage) const {
  std::vector<int> ranks;
  for (int r = 0; r < num_ranks(); ++r) {
    for (std::int32_t v : schedule.layout.rank_vstages[static_cast<std::size_t>(r)]) {
      if (v == vstage) ranks.push_back(r);
    }
  }
  return ranks;
}

bool PipelinePlan::sharded() const {
  for (const spec::ShardPolicy& s : vstage_shard) {
    if (s.level > 0 || s.offload) return true;
  }
  return false;
}

std::vector<std::int64_t> PipelinePlan::shard_bounds(int vstage, std::int64_t elements) const {
  std::vector<std::uint64_t> weights;
  for (int r : holders(vstage)) {
    const DeviceEmulation& d = devices[static_cast<std::size_t>(r)];
    weights.push_back(shard_shares == ParallelConfig::Shares::memory && d.memory_bytes ? *d.memory_bytes : 1);
  }
  return spec::shard_bounds(elements, weights);
}

std::string PipelinePlan::rank_label(int rank) const {
  const auto& stages = schedule.layout.rank_vstages[static_cast<std::size_t>(rank)];
  std::string label = "rank " + std::to_string(rank) + (stages.size() > 1 ? ": stages " : ": stage ");
  for (std::size_t c = 0; c < stages.size(); ++c) {
    label += (c ? ", " : "") + std::to_string(stages[c]);
  }
  const DeviceEmulation& d = devices[static_cast<std::size_t>(rank)];
  if (d.slowdown != 1.0 || d.type != "host") {
    char text[64];
    std::snprintf(text, sizeof text, " (%s, x%.2g)", d.type.c_str(), d.slowdown);
    label += text;
  }
  return label;
}

int PipelinePlan::max_tensor_parallel() const {
  int most = 1;
  for (int t : rank_tensor_parallel) most = std::max(most, t);
  return most;
}

bool PipelinePlan::uniform_tensor_parallel() const {
  return std::all_of(rank_tensor_parallel.begin(), rank_tensor_parallel.end(),
                     [&](int t) { return t == rank_tensor_parallel.front(); });
}

int PipelinePlan::first_job_rank(int rank) const {
  if (rank_tensor_parallel.empty()) return rank;
  int base = 0;
  for (int r = 0; r < rank; ++r) base += rank_tensor_parallel[static_cast<std::size_t>(r)];
  return base;
}

int PipelinePlan::schedule_rank_of(int job_rank) const {
  if (rank_tensor_parallel.empty()) return job_rank;
  int base = 0;
  for (int r = 0; r < num_ranks(); ++r) {
    base += rank_tensor_parallel[static_cast<std::size_t>(r)];
    if (job_rank < base) return r;
  }
  throw Error("job rank " + std::to_string(job_rank) + " is past the plan's " + std::to_string(base) + " ranks");
}

std::vector<int> PipelinePlan::vstage_tensor_parallel() const {
  std::vector<int> degrees;
  for (const model::StageSpec& s : vstage_specs) degrees.push_back(s.tensor_parallel);
  return degrees;
}

std::string PipelinePlan::job_rank_label(int job_rank) const {
  if (!any_tensor_parallel()) return std::to_string(job_rank);
  return std::to_string(schedule_rank_of(job_rank)) + "." + std::to_string(tp_rank_of(job_rank));
}

PipelinePlan build_pipeline_plan(const JobConfig& job, std::optional<int> world_size) {
  const ParallelConfig& p = job.parallel;
  // The largest degree: segments must divide by it (below), and every stage's degree divides it,
  // so it is the lcm of any two (a boundary between degrees t and t' cuts its message into pieces
  // of 1/max(t, t') of the segment: runtime/reshard.h).
  const int tp = p.max_tensor_parallel();
  for (int t : p.tp) {
    if (tp % t != 0) {
      throw Error(where(job, "tp") + ": degree " + std::to_string(t) + " does not divide the largest, " +
                  std::to_string(tp) + " (stages of different degrees reshard their boundary messages into "
                  "pieces of 1/max of a segment; use degrees that divide each other, as 1, 2, 4, 8)");
    }
  }
  for (int t : p.tp) {
    if (t == 1) continue;
    try {
      spec::check_tensor_parallel(job.run.model, t);
    } catch (const Error& e) {
      throw Error(where(job, "tp") + ": " + e.what());
    }
  }
  if (tp > 1 && job.run.train.sample_every > 0) {
    throw Error(job.run.source + ": train.sample_every: samples during training decode whole stages, not "
                "tensor-parallel ones (parallel.tp " + std::to_string(tp) + "); sample the checkpoint with plait "
                "generate instead");
  }
  PipelinePlan plan;
  const TrainConfig train = job.global_train();
  plan.model = job.run.model;
  plan.microbatch_size = train.microbatch_size;
  plan.seq = train.seq;
  plan.precision = train.precision;
  plan.grad_reduce = train.grad_reduce;
  // The one cut, carried to the executor and traces. Under TP a flops split rounds its lengths to
  // multiples of t (sequence parallelism splits every unit's tokens over the group; the Seq1F1B
  // reference's rounding), with t the largest degree when stages differ, unless the config gave
  // its own multiple.
  spec::SegmentRequest segments = job.run.train.segments;
  if (tp > 1 && segments.split == spec::SplitMethod::flops && segments.multiple == 1 && !segments.explicit_lengths()) {
    segments.multiple = tp;
  }
  plan.partition = tp > 1 ? spec::cut_sequence(job.run.model, job.run.train.seq, segments) : job.run.partition();
  const int k = plan.partition.count();
  plan.document_cuts = job.run.data.packs_documents() && segments.split == spec::SplitMethod::flops && k > 1 &&
                       !segments.explicit_lengths();
  plan.cut_multiple = segments.multiple;
  try {
    spec::check_sequence_parallel(plan.partition.lengths, tp);
  } catch (const Error& e) {
    throw Error(where(job, "tp") + ": " + e.what());
  }

  plan.schedule = schedule::parallel_schedule(p, job.run.train.microbatches, k, job.run.source);
  plan.schedule_name = p.form == ParallelConfig::Form::generated ? p.schedule : p.schedule_name;
  const int vstages = plan.schedule.layout.num_vstages;
  plan.vstage_layers = p.layers.empty() ? even_layers(job, vstages) : p.layers;
  if (static_cast<int>(plan.vstage_layers.size()) != vstages) {
    throw Error(where(job, "layers") + ": expected one layer count per virtual stage (" +
                std::to_string(vstages) + "), found " + std::to_string(plan.vstage_layers.size()));
  }
  const int total = std::accumulate(plan.vstage_layers.begin(), plan.vstage_layers.end(), 0);
  if (total != plan.model.layers) {
    throw Error(where(job, "layers") + ": the layers per virtual stage sum to " +
                std::to_string(total) + ", expected model.layers " + std::to_string(plan.model.layers));
  }
  std::vector<int> recompute;
  try {
    recompute = p.recompute.resolve(plan.vstage_layers);
  } catch (const Error& e) {
    throw Error(where(job, "recompute") + ": " + e.what());
  }
  if (p.tp.size() > 1 && static_cast<int>(p.tp.size()) != vstages) {
    throw Error(where(job, "tp") + ": expected one degree for every virtual stage or one per virtual stage (" +
                std::to_string(vstages) + "), found " + std::to_string(p.tp.size()));
  }
  int first = 0;
  for (int v = 0; v < vstages; ++v) {
    const int n = plan.vstage_layers[static_cast<std::size_t>(v)];
    const model::StageSpec spec{first, first + n, v == 0, v == vstages - 1,
                                recompute[static_cast<std::size_t>(v)], plan.precision, p.tensor_parallel(v)};
    if (spec.layer_count() == 0 && !spec.has_embedding && !spec.has_head) {
      throw Error(where(job, "layers") + ": virtual stage " + std::to_string(v) +
                  " has no layers (only the first and last stage may, holding the embedding or head)");
    }
    plan.vstage_specs.push_back(spec);
    first += n;
  }
  plan.devices = p.devices.empty() ? std::vector<DeviceEmulation>(static_cast<std::size_t>(p.world_size()))
                                   : p.devices;
  // Each schedule rank is one TP group: every stage it holds (the chunks of an interleaved or V
  // schedule) runs on the same t devices, so they must share one degree; a stage's data-parallel
  // holders then share it too (the degree is the stage's).
  if (tp > 1) {
    for (int r = 0; r < plan.num_ranks(); ++r) {
      const auto& stages = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(r)];
      const int t = stages.empty() ? 1 : p.tensor_parallel(stages.front());
      for (std::int32_t v : stages) {
        if (p.tensor_parallel(v) != t) {
          throw Error(where(job, "tp") + ": rank " + std::to_string(r) + " holds virtual stages " +
                      std::to_string(stages.front()) + " (degree " + std::to_string(t) + ") and " + std::to_string(v) +
                      " (degree " + std::to_string(p.tensor_parallel(v)) + "): the stages of one rank run on its one "
                      "tensor-parallel group and need the same degree");
        }
      }
      plan.rank_tensor_parallel.push_back(t);
    }
  }
  if (world_size && plan.world_size() != *world_size) {
    const std::string field = p.form == ParallelConfig::Form::generated ? "pp" : "rank_vstages";
    // What the count is made of: "pp 2 x dp 1 x tp 2", or with per-stage degrees the sum of the
    // schedule ranks' ("tp by rank 2 + 1").
    std::string degrees;
    if (tp > 1 && plan.uniform_tensor_parallel()) {
      degrees = "tp " + std::to_string(tp);
    } else if (tp > 1) {
      for (int r = 0; r < plan.num_ranks(); ++r) degrees += (r ? " + " : "tp by rank ") + std::to_string(plan.tensor_parallel(r));
    }
    std::string layout;
    if (p.form == ParallelConfig::Form::generated) {
      layout = " (pp " + std::to_string(p.pp) + " x dp " + std::to_string(p.dp) +
               (degrees.empty() ? "" : (plan.uniform_tensor_parallel() ? " x " : ", ") + degrees) + ")";
    } else if (!degrees.empty()) {
      layout = " (" + (plan.uniform_tensor_parallel() ? std::to_string(plan.num_ranks()) + " x " + degrees : degrees) + ")";
    }
    throw Error(where(job, field) + ": the layout needs " + std::to_string(plan.world_size()) + " ranks" + layout +
                " but the job has " + std::to_string(*world_size) + " (start it with mpirun -np " +
                std::to_string(plan.world_size()) + ")");
  }

  schedule::check_data_parallel(p, plan.schedule.layout, job.run.source);
  plan.shard_shares = p.shard_shares;
  for (int v = 0; v < vstages; ++v) plan.vstage_shard.push_back({p.shard_level(v), p.offloaded(v)});
  for (int v = 0; v < vstages; ++v) plan.vstage_offload_activations.push_back(p.activations_offloaded(v));

  // Every rule of docs/schedules.md, including the deadlock check with receives posted ahead:
  // the executor never blocks on a send (nonblocking sends, completed lazily), which is exactly
  // the validator's "ahead" semantics whatever window of receives it keeps posted.
  if (const auto violation = schedule::validate(plan.schedule)) {
    throw Error(where(job, p.form == ParallelConfig::Form::generated ? "schedule" : "schedule_text") +
                ": " + schedule::summary(plan.schedule, *violation));
  }
  return plan;
}

PipelinePlan forward_only_plan(const PipelinePlan& plan) {
  PipelinePlan forward = plan;
  for (auto& actions : forward.schedule.ranks) {
    std::erase_if(actions, [](const schedule::Action& a) { return a.kind != schedule::ActionKind::F; });
  }
  return forward;
}

}  // namespace plait::runtime
