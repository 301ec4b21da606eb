#pragma once
// What a parallel job runs, resolved from its config before anything executes: the schedule (a
// generated family replicated over data-parallel replicas, or the explicit per-rank lists), the
// layers of every virtual stage (the embedding on virtual stage 0, the final norm + LM head +
// loss on the last), the layers each virtual stage recomputes (parallel.recompute, in
// vstage_specs), the sequence segments, and each rank's emulated device. The schedule is
// validated here (schedule::validate), so a plan that exists can run.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plait/model/stage_spec.h"
#include "plait/runtime/parallel_config.h"
#include "plait/schedule/schedule.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"
#include "plait/spec/sharded_state.h"

namespace plait::runtime {

struct PipelinePlan {
  std::string schedule_name;   // "seq1f1b", or the explicit form's schedule_name
  schedule::Schedule schedule; // micro-batch ids are global (0 .. global_microbatches-1)
  spec::ModelSpec model;
  std::vector<int> vstage_layers;
  std::vector<model::StageSpec> vstage_specs;
  spec::SequencePartition partition;  // cut once, from the job's segment request
  // Work-aware cuts (issue 24 part 4): with packed documents and a flops split into k > 1
  // segments, each micro-batch is cut from its own documents (spec/document_partition.h, lengths
  // multiples of cut_multiple); `partition` is then the nominal full-causal cut (the structure:
  // k, and what plans and profiles assume). Every rank computes a micro-batch's cut from the
  // loader's documents (microbatch_partition.h), so nothing is communicated.
  bool document_cuts = false;
  std::int64_t cut_multiple = 1;
  int microbatch_size = 1;
  int seq = 0;
  spec::Precision precision = spec::Precision::fp32;  // train.precision (spec/precision_policy.h)
  spec::GradReduce grad_reduce = spec::GradReduce::fp32;  // train.grad_reduce: what DP reduces
  std::vector<DeviceEmulation> devices;  // one per rank (defaults when the config has none)
  // Sharded data parallelism of every virtual stage inside its holders' group (parallel.shard,
  // parallel.offload; spec/sharded_state.h), and how the holders' shares are weighed.
  std::vector<spec::ShardPolicy> vstage_shard;
  ParallelConfig::Shares shard_shares = ParallelConfig::Shares::equal;
  // Activation offload of every virtual stage (parallel.offload "activations" or "all";
  // runtime/activation_offload.h); empty: none.
  std::vector<bool> vstage_offload_activations;
  bool offloads_activations(int vstage) const {
    return !vstage_offload_activations.empty() && vstage_offload_activations[static_cast<std::size_t>(vstage)];
  }
  // Tensor parallelism (parallel.tp; model/tensor_parallel.h): schedule rank r is a TP group of
  // rank_tensor_parallel[r] = t_r consecutive ranks of the job, job ranks [base_r, base_r + t_r)
  // with base_r = t_0 + ... + t_(r-1) (TP innermost: one machine), every stage it holds split
  // over them. All stages of a rank share its degree (and so do a stage's data-parallel
  // holders); adjacent stages of different degrees reshard their boundary messages
  // (runtime/reshard.h). Empty: no TP (t_r = 1). The schedule, the layout, the devices and
  // everything indexed by rank speak of the schedule's ranks.
  std::vector<int> rank_tensor_parallel;

  int num_ranks() const { return schedule.num_ranks(); }
  // Schedule rank r's TP degree t_r.
  int tensor_parallel(int rank) const {
    return rank_tensor_parallel.empty() ? 1 : rank_tensor_parallel[static_cast<std::size_t>(rank)];
  }
  int max_tensor_parallel() const;
  // Whether some rank runs tensor parallelism, and whether every rank runs the same degree.
  bool any_tensor_parallel() const { return max_tensor_parallel() > 1; }
  bool uniform_tensor_parallel() const;
  // The job's ranks: the sum of the schedule ranks' degrees.
  int world_size() const { return first_job_rank(num_ranks()); }
  // base_r: the job rank of schedule rank r's TP rank 0 (r = num_ranks(): the world size).
  int first_job_rank(int rank) const;
  int job_rank(int rank, int tp_rank) const { return first_job_rank(rank) + tp_rank; }
  // The schedule rank a job rank belongs to, and its TP rank there.
  int schedule_rank_of(int job_rank) const;
  int tp_rank_of(int job_rank) const { return job_rank - first_job_rank(schedule_rank_of(job_rank)); }
  // The degree of every virtual stage (sim::MemoryOptions::tensor_parallel's form).
  std::vector<int> vstage_tensor_parallel() const;
  // "3" without TP, else "<schedule rank>.<TP rank>" ("1.0"), for tables of job ranks.
  std::string job_rank_label(int job_rank) const;
  int num_vstages() const { return static_cast<int>(vstage_layers.size()); }
  int global_microbatches() const { return schedule.layout.num_microbatches; }
  // Tokens in the global batch: the denominator of every unit's loss scale.
  std::int64_t global_tokens() const {
    return std::int64_t{global_microbatches()} * microbatch_size * seq;
  }
  // The ranks holding virtual stage `vstage`, ascending.
  std::vector<int> holders(int vstage) const;
  // Segment i of every sequence.
  spec::Segment segment(int i) const { return partition.segment(i); }
  // The tied embedding table lives in two different virtual stages (embedding and head apart).
  bool tied_table_split() const { return model.tie_embeddings && num_vstages() > 1; }
  // Whether any stage is sharded (level > 0) or offloaded.
  bool sharded() const;
  // The shard bounds of virtual stage `vstage`'s flat buffer of `elements` over holders(vstage)
  // (spec::shard_bounds with equal weights, or the holders' memory_bytes).
  std::vector<std::int64_t> shard_bounds(int vstage, std::int64_t elements) const;
  // "rank 3: stages 3, 4" style row labels for timelines.
  std::string rank_label(int rank) const;
};

// Builds and validates the plan for a job on `world_size` ranks (none: on the ranks its layout
// needs, PipelinePlan::world_size(); what plait launch starts mpirun with). Every problem is one
// plait::Error line: a world size other than the sum of the ranks' TP degrees, TP degrees that
// differ between stages of one rank, that do not divide the model's heads, K/V heads or FFN,
// adjacent stages' degrees of which neither divides the other, segments their largest degree does
// not divide, a family that cannot produce the
// shape, a layer split that does not add up, recompute counts beyond a stage's layers
// ("cfg.json: parallel.recompute: virtual stage 2 has 1 layer, cannot recompute 2"), an
// invalid schedule (the validator's summary).
PipelinePlan build_pipeline_plan(const JobConfig& job, std::optional<int> world_size);

// The plan of a forward-only pass (evaluation): the same layout, each rank's F actions in their
// order. It runs without deadlock whenever the plan does: F actions depend only on F actions, so
// each one's inputs were produced before it in the full schedule's execution already.
PipelinePlan forward_only_plan(const PipelinePlan& plan);

}  // namespace plait::runtime
