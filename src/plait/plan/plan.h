#pragma once
// A plan: the choices the planner makes (stage groups of devices and their micro-batch shares,
// layers per virtual stage, micro-batch size, schedule family, chunks, segments, the layers
// each virtual stage recomputes)
// and what it predicts for them. The problem it solves: a cluster, a model, a global batch and a
// sequence length.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plait/plan/cluster_spec.h"
#include "plait/plan/memory_policy.h"
#include "plait/plan/plan_documents.h"
#include "plait/schedule/schedule.h"
#include "plait/schedule/schedule_family.h"
#include "plait/spec/sequence_partition.h"
#include "plait/sim/device_profile.h"
#include "plait/spec/model_presets.h"
#include "plait/spec/sharded_state.h"

namespace plait::plan {

struct PlanningProblem {
  ClusterSpec cluster;
  spec::NamedModel model;
  std::int64_t global_batch = 0;  // sequences per optimizer step
  std::int64_t seq = 0;           // tokens per sequence
  // One per cluster device type: the real speeds (slow-downs applied).
  std::vector<sim::DeviceProfile> type_profiles;
  // The speeds schedules and shares are planned for: type_profiles, except when planning an
  // even layout that ignores heterogeneity (then every type gets one reference profile).
  std::vector<sim::DeviceProfile> planning_profiles;

  // Tensor-parallel rank kinds (spec/tensor_parallel_plan.h): a rank is a TP group of t devices
  // of one type inside one machine, timed by its type's profile with t and the group's ring link.
  // Kind k < types is type k at t = 1; the others every (type, t, link) a machine of the cluster
  // can form, t in {2, 4, 8} dividing the machine's devices of that type (set by make_problem).
  struct RankKind {
    int type = 0;
    int degree = 1;
    sim::LinkProfile link;
  };
  std::vector<RankKind> tp_kinds;  // the kinds beyond the types

  // Packed documents (plan_documents.h): when set, plans are made for the worst micro-batch of
  // the drawn steps (memory for the worst cut, the step time of the slowest step); null: every
  // micro-batch full causal rows.
  std::shared_ptr<const DocumentLoads> documents;

  const sim::DeviceProfile& profile(int device) const { return type_profiles[cluster.devices[device].type]; }
  double tokens_per_step() const { return static_cast<double>(global_batch) * static_cast<double>(seq); }
  int num_kinds() const { return static_cast<int>(cluster.types.size() + tp_kinds.size()); }
  // The kind of a rank whose TP group is devices lead .. lead + t - 1; throws plait::Error when
  // those are not t devices of one type in one machine.
  int kind(int lead, int t) const;
  // The TP group's devices of rank `lead` at degree t, or empty when they do not form one.
  std::vector<int> tp_members(int lead, int t) const;
  // The link the TP group's ring runs over: its slowest neighbour link (bandwidth), the largest
  // latency.
  sim::LinkProfile tp_ring_link(const std::vector<int>& members) const;
  int kind_type(int kind) const { return kind < static_cast<int>(cluster.types.size()) ? kind : tp_kinds[kind - cluster.types.size()].type; }
  int kind_degree(int kind) const { return kind < static_cast<int>(cluster.types.size()) ? 1 : tp_kinds[kind - cluster.types.size()].degree; }
  sim::LinkProfile kind_link(int kind) const;
};

// Devices lead .. lead + t - 1 when they are t devices of one type in one machine, else empty.
std::vector<int> tp_members(const ClusterSpec& cluster, int lead, int t);

// The TP degrees a plan may give a stage (docs/planner.md): within one machine, dividing its
// devices of the stage's type.
inline constexpr int kTensorParallelDegrees[] = {1, 2, 4, 8};

// Fills problem.tp_kinds: every (type, t, ring link) of t > 1 consecutive devices of one type in
// one machine whose devices of that type t divides.
void add_tensor_parallel_kinds(PlanningProblem& problem);

// One pipeline stage group: its ranks, each the first device (cluster device id) of a TP group of
// `tp` consecutive devices of one type in one machine (t = 1: a rank is its device), and the
// micro-batches each rank runs.
struct StageGroup {
  std::vector<int> devices;
  std::vector<int> microbatches;
  int tp = 1;
};

struct PlanChoice {
  std::string family = "1f1b";
  int chunks = 1;
  int segments = 1;
  spec::SplitMethod split = spec::SplitMethod::even;
  int microbatch_size = 1;
  int num_microbatches = 1;  // global M: global_batch / microbatch_size
  // Layers each virtual stage recomputes (parallel.recompute's per-stage form); empty: none.
  std::vector<int> recompute_layers;
  std::vector<StageGroup> groups;  // pipeline order
  std::vector<int> vstage_layers;  // groups x chunks entries, in virtual stage order
  // The virtual stages each group holds, when read from a plan file whose layout is neither
  // interleaved nor a V; empty: as the family places them.
  std::vector<std::vector<std::int32_t>> held;
  // Sharded data parallelism of each group's stages (spec/sharded_state.h); empty: the
  // precision's default (default_shard); memory_shares: shards proportional to the devices'
  // memory rather than equal.
  std::vector<spec::ShardPolicy> shard;
  bool memory_shares = false;
  // Activation offload of each group's stages (parallel.offload "activations";
  // schedule/activation_offload.h), chosen where a group does not fit otherwise; empty: none.
  std::vector<bool> offload_activations;
  bool offloads_activations(int group) const {
    return !offload_activations.empty() && offload_activations[static_cast<std::size_t>(group)];
  }
  // A flops split's lengths are multiples of this (sequence parallelism: of every group's t).
  std::int64_t split_multiple = 1;
  // Why each group runs its TP degree (the planner's comparison of the degrees it could use;
  // empty when not planned).
  std::vector<std::string> tp_notes;

  bool tensor_parallel() const {
    return std::any_of(groups.begin(), groups.end(), [](const StageGroup& g) { return g.tp > 1; });
  }
  // The TP degree of every virtual stage (its group's; MemoryOptions::tensor_parallel).
  std::vector<int> vstage_tensor_parallel() const;
  // The TP degree of every rank, in rank order.
  std::vector<int> rank_tensor_parallel() const;
  // Devices the plan uses: the ranks' TP groups.
  int devices_used() const;

  int num_groups() const { return static_cast<int>(groups.size()); }
  bool recomputes() const {
    return std::any_of(recompute_layers.begin(), recompute_layers.end(), [](int n) { return n > 0; });
  }
  spec::Recompute recompute() const {
    return recomputes() ? spec::Recompute::stages(recompute_layers) : spec::Recompute{};
  }
  // The family's policy fields (schedule_family.h); throws plait::Error for an unknown family.
  const schedule::ScheduleFamily& policy() const;
  // Ranks are the used devices in ascending device order: rank r runs on rank_devices()[r].
  std::vector<int> rank_devices() const;
  // The virtual stages group g holds, in chunk order (as read from a plan file, else the
  // family's placement over the groups).
  std::vector<std::int32_t> group_vstages(int group) const;
  // "seq1f1b k=4 (flops) b=2 M=512, 4 stages [8|16|16|24 devices], layers 11,7,9,5" (and
  // "recompute 2,0,0,1" when it recomputes)
  std::string summary(const ClusterSpec& cluster) const;
  // Group g's policy: shard[g], or the default for the precision and the group's width.
  spec::ShardPolicy shard_of(int group, Precision precision) const;
  // The share of a group's stages device `index` of it holds under its policy: 1 at level 0,
  // 1/n for equal shares, memory / (the group's memory) for memory shares.
  double shard_fraction(const ClusterSpec& cluster, int group, std::size_t index, Precision precision) const;
};

// What plans assumed before the planner chose sharding: bf16 shards the optimizer state over the
// stage's group (level 1, as Megatron-LM's distributed optimizer), fp32 nothing (level 0).
spec::ShardPolicy default_shard(Precision precision, int group_size);

struct DevicePrediction {
  int device = 0;
  int rank = 0;
  int group = 0;
  int microbatches = 0;
  double busy_seconds = 0;
  double static_bytes = 0, activation_bytes = 0, reserve_bytes = 0, capacity_bytes = 0;
  // The host tier: offloaded optimizer state, master weights and staged gradients, and its
  // capacity (0: none).
  double host_bytes = 0, host_capacity_bytes = 0;
  spec::ShardPolicy shard;
  double total_bytes() const { return static_bytes + activation_bytes + reserve_bytes; }
};

struct PlanPrediction {
  bool simulated = false;        // false: the analytic estimate
  double pipeline_seconds = 0;   // until the last compute ends
  double step_seconds = 0;       // with each stage's gradient synchronisation after it
  double sync_seconds = 0;       // the longest stage synchronisation
  double bubble_fraction = 0;    // idle share of ranks x pipeline time
  double tokens_per_second = 0;
  std::vector<DevicePrediction> devices;  // one per rank
  bool fits = true;
  std::string over_memory;  // the first device over its memory, when !fits
  // With packed documents (PlanningProblem::documents), simulated plans: the worst case planned
  // for and what it cost.
  std::optional<DocumentPrediction> documents;
};

// The sequence partition a choice runs: choice.segments cut by choice.split (spec::cut_sequence).
spec::SequencePartition plan_partition(const PlanningProblem& problem, const PlanChoice& choice);

// What activations, K/V prefixes, messages and working sets are sized for: `nominal`, or with
// packed documents cut per micro-batch (a flops split of k > 1) the worst cut of the drawn steps
// at `multiple` (DocumentLoad::worst; plan_documents.h).
spec::SequencePartition planned_memory_partition(const PlanningProblem& problem, int microbatch_size,
                                                 const spec::SequencePartition& nominal, std::int64_t multiple);
// The multiple the runtime rounds a per-micro-batch cut of `choice` to: its split_multiple, or
// under tensor parallelism its largest degree (runtime::PipelinePlan's cut_multiple).
std::int64_t document_cut_multiple(const PlanChoice& choice);

// "31.20 GiB", or "35.29 MiB" below 4 GiB (emulated devices), for reports and errors.
std::string bytes_text(double bytes);

struct Plan {
  PlanChoice choice;
  PlanPrediction prediction;
  schedule::Schedule schedule;  // set for simulated plans
};

}  // namespace plait::plan
