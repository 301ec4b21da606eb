#pragma once
// The planner: given a cluster, a model, a global batch and a sequence length, search
//   (a) stage groups of devices, bandwidth-aware (stage_grouping.h),
//   (b) layers per stage (load_balance.h: greedy fill against each stage's time and memory),
//   (c) the micro-batch size b (dividing the global batch) and each device's micro-batch count
//       (proportional to its speed),
//   (d) the schedule family, chunks, the number of sequence segments k and their split (even or
//       equal FLOPs),
//   (e) activation recomputation per stage: the fewest of a stage's layers that make it fit,
//       any family and precision (its time pays the rebuilds),
//   (f) the tensor-parallel degree t of each stage (ranks become TP groups of t devices of one
//       machine: spec/tensor_parallel_plan.h), the one that fits with the least stage time,
// rejecting every layout over any device's memory (memory_policy.h).
// Three passes: a coarse pass ranks groupings by work + gradient synchronisation for each b; the
// best groupings get every schedule option, estimated analytically (plan_estimate.h); the best
// estimates are scheduled and simulated (plan_simulation.h), which ranks the final plans.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plait/core/search_progress.h"
#include "plait/plan/plan.h"

namespace plait::plan {

struct PlannerOptions {
  std::vector<std::string> families;      // schedule families to consider; empty: all
  std::vector<std::string> device_types;  // cluster device types to use; empty: all
  bool segments = true;                   // false: whole micro-batches only (k = 1)
  // Sequence segments only where every unit (micro-batch size x shortest segment) holds at least
  // this many tokens; -1: the largest shortest_seq of the measured profiles used (a profile is
  // not extrapolated below the smallest work it measured), 0: no limit.
  std::int64_t min_unit_tokens = -1;
  std::vector<int> microbatch_sizes;      // empty: 1, 2, 4, ..., 64 where they divide the batch
  bool recompute = true;                  // may plan recomputation (per stage, where memory needs it)
  bool shard = true;                      // may shard a stage's state over its group or offload it
  bool even = false;                      // plan as if every device were alike, stages of
                                          // equal width (a pp x dp baseline)
  // Tensor-parallel degrees a stage may use (tensor_parallel_options.h); empty: 1, 2, 4, 8 on a
  // real cluster, 1 on an emulated one (its CPU ranks' links are shared memory, not a machine's
  // NVLink; --tp opts in). `plait train` runs the plan whether its stages share one degree or not
  // (runtime/reshard.h).
  std::vector<int> tensor_parallel;
  int max_groups = 16;                    // pipeline stages at most
  int grouping_shortlist = 40;            // groupings per micro-batch size kept by the coarse pass
  int tp_grouping_shortlist = 12;         // ... for the search with TP (planner.cpp, "Pruning")
  int simulate_tp = 6;                    // estimated plans with TP re-ranked by simulation, besides
  int simulate = 16;                      // estimated plans re-ranked by simulation
  // ... besides, of the newer families (ScheduleFamily::own_simulation_slots) in a search that
  // does not name families (planner.cpp, "shortlist")
  int simulate_newer = 4;
  int top = 5;                            // plans returned
  // Told how far each pass has got: the coarse pass over the groupings of each micro-batch size,
  // the fine pass over the shortlisted groupings, the simulation of the best estimates.
  SearchProgress progress;
};

// An upper bound of what plan_cluster holds, from the devices it plans for (docs/planner.md,
// "Memory and time of a search"): the simulation of a plan on all of them keeps two copies of
// its per-pair link matrix (16 bytes a pair: the simulation's and its cost model's), the search
// up to 200 KiB per device besides, and ~96 MiB of profiles and tables. Measured peak RSS of
// plait plan on clusters of 496, 1,000, 2,000 and 4,000 devices: 147, 254, 448 and 489 MB
// (bound: 205, 327, 618, 1,393 MB; plans on large clusters use fewer of the devices).
double planner_memory_bytes(int devices);

struct PlannerResult {
  std::vector<Plan> plans;  // within memory, best first; predictions on the real devices
  // With options.even: what the planner predicted when it assumed alike devices.
  std::vector<PlanPrediction> assumed;
  std::size_t groupings = 0;  // candidate groupings (all micro-batch sizes)
  std::size_t estimated = 0;  // layouts estimated analytically
  std::size_t simulated = 0;  // layouts scheduled and simulated
  double seconds = 0;         // wall time of the search
  // Every simulated layout: its estimate next to its simulation (for --verbose).
  struct Shortlisted {
    std::string summary;
    double estimated_step = 0, simulated_step = 0;
    std::string over_memory;  // simulated over a device's memory
  };
  std::vector<Shortlisted> shortlist;
  std::string reference;      // with options.even: the profile every device was taken to have
  // The best simulated step of each family that has a plan within memory, best first (which
  // family won, and by how much over the others).
  struct FamilyBest {
    std::string family;
    double step_seconds = 0;
    bool newer = false;  // one of the families with their own simulation slots
  };
  std::vector<FamilyBest> family_best;
  std::int64_t min_unit_tokens = 0;  // the limit on segmented units applied (0: none)
  std::string min_unit_source;       // where it came from
};

// Resolves the cluster's device profiles for the model at `seq`: of every type, or only of
// `used_types` when given (planning with --devices-of-type; the others are never asked for).
PlanningProblem make_problem(ClusterSpec cluster, spec::NamedModel model, std::int64_t global_batch,
                             std::int64_t seq, const std::vector<std::string>& used_types = {});

// Throws plait::Error("cannot plan: <one-line reason>") when no layout fits.
PlannerResult plan_cluster(const PlanningProblem& problem, const PlannerOptions& options);

}  // namespace plait::plan
