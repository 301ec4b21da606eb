#pragma once
// Heterogeneous pipelines (Zorse: Guo et al., arXiv 2507.10392; ../shared/reference/zorse.md):
// pipeline stages that are GROUPS of ranks of different sizes and speeds. Inside a group every
// rank holds the same model chunk(s) (a data-parallel group), but each runs its own number of
// micro-batches (Zorse: n_g about proportional to 1/(f_g + b_g)), and micro-batches travel
// many-to-many between groups of different widths.
//
// The result is an ordinary Schedule with an explicit layout (several ranks per virtual stage,
// global micro-batch ids), so the validator, lowering, simulator and runtime need nothing
// special. It is built in two steps:
//   1. route_microbatches(): a static equivalent of Zorse's dynamic routing ("the i-th finished
//      micro-batch goes to the next-stage GPU with the most remaining work"). Global ids follow
//      the estimated completion order on the first group (rank r finishes its j-th micro-batch at
//      about j * tau_r, tau_r its forward + backward time per micro-batch); each later group takes
//      micro-batches in their estimated arrival order and gives each to the rank with the most
//      remaining work (micro-batches still to take x tau), then advances that rank's estimate.
//   2. list_schedule() with per-rank costs, message times, that routing, and the family's policy:
//      which backward (fused BW, or B with W filling gaps), GPipe's forwards-first, and an
//      in-flight limit per rank (heterogeneous_in_flight_limits()). The order is a recorded
//      execution under the estimated costs, so it is deadlock-free whatever the real costs are.
//
// Families: gpipe, 1f1b, seq1f1b, zb-h1, seq-zb (one chunk per rank), interleaved, seq1f1b-i
// (v >= 2 chunks: group g holds virtual stages g + c*P) and zb-v (group g holds g and 2P-1-g).
// Each is the family's policy (fused or split backward, the family's warm-up as memory limit),
// not its homogeneous generator's exact order: with one rank per stage and equal costs the
// 1F1B and ZB-V policies reproduce the generators action for action (tested); Seq1F1B's policy
// runs a ready backward as soon as it can where the fixed pattern alternates strictly.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "plait/schedule/schedule.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/unit_costs.h"

namespace plait::schedule {

struct HeterogeneousPipeline {
  // stage_ranks[g]: the ranks of pipeline group g (g = 0 first); each rank 0..R-1 in exactly one.
  std::vector<std::vector<int>> stage_ranks;
  // stage_counts[g][i]: micro-batches that stage_ranks[g][i] runs (on each chunk it holds);
  // every group sums to num_microbatches.
  std::vector<std::vector<int>> stage_counts;
  int num_microbatches = 1;
  int num_segments = 1;
  int chunks = 1;  // chunks per rank (virtual stages = groups x chunks)

  int num_groups() const { return static_cast<int>(stage_ranks.size()); }
  int num_ranks() const;
  // The homogeneous shape with one rank per group: {groups, chunks, micro-batches, segments}.
  PipelineShape shape() const;
};

using HeterogeneousCosts = UnitCosts;

// Throws plait::Error naming the problem (a rank in two groups or none, counts that do not add
// up to num_microbatches, a negative count, ...).
void check_heterogeneous_pipeline(const HeterogeneousPipeline& pipeline);

// "" when `family` can run on heterogeneous groups with this shape, else one sentence why.
std::string heterogeneous_unsupported(std::string_view family, const HeterogeneousPipeline& pipeline);

// The layout a family with `placement` uses: every rank of group g holds the virtual stages
// placed at position g (layout.h's placed_vstage over the groups).
Layout heterogeneous_layout(const HeterogeneousPipeline& pipeline, StagePlacement placement);

// routing[vstage][mb]: the rank that runs micro-batch mb on vstage (step 1 above).
std::vector<std::vector<std::int32_t>> route_microbatches(const HeterogeneousPipeline& pipeline,
                                                          const Layout& layout,
                                                          const HeterogeneousCosts& costs);

// In-flight limit (units, F started and W or BW not finished) of every rank for `family`: the
// family's own limit (ScheduleFamily::in_flight_limit) for the rank's group in the homogeneous
// shape, scaled for unlike speeds; 0 when the family has none (GPipe). One chunk: rank r of group
// g with unit time u (F + B + W of one segment) has a round trip of
//   1 + ceil((sum of the later groups' mean unit times + (k - 1) x the slowest of them and u) / u)
// units, which is P - g - 1 + k (the 1F1B families' limit) when all ranks are alike and more for
// a rank faster than the groups after it (its micro-batches take longer to come back); the
// family's limit is scaled by round trip / (P - g - 1 + k). Several chunks: scaled by the mean
// unit time over r's (>= 1). For fused-backward families, unless every rank is alike and every
// group as wide, the limit is doubled: off lock-step a micro-batch also queues at the ranks it
// visits (see the .cpp). Split families' deferred W's (ZB-H1's) are not added: at the limit a
// rank runs its pending W's (list_scheduler.h), which keeps 1F1B's memory.
std::vector<int> heterogeneous_in_flight_limits(const ScheduleFamily& family,
                                                const HeterogeneousPipeline& pipeline,
                                                const Layout& layout,
                                                const HeterogeneousCosts& costs);
std::vector<int> heterogeneous_in_flight_limits(std::string_view family,
                                                const HeterogeneousPipeline& pipeline,
                                                const Layout& layout,
                                                const HeterogeneousCosts& costs);

// The heterogeneous pipeline `schedule` runs under `family`'s placement: its groups (the ranks at
// each pipeline position, ascending) and every rank's micro-batch count (the micro-batches it
// forwards on its first chunk), read from the action lists. The inverse of heterogeneous_schedule
// for the layout and counts, so a running job can regenerate its schedule with other counts (a
// re-balance, docs/runtime.md "Stragglers and restarts"). Throws plait::Error saying why when the
// layout is not one heterogeneous_layout makes for the family (ranks with unlike chunk counts, a
// group whose ranks hold other stages).
HeterogeneousPipeline heterogeneous_pipeline_of(const Schedule& schedule, const ScheduleFamily& family);

// Routes, list-schedules and returns the schedule (not yet validated; schedule::validate it) with
// the family's policy fields: its placement, split or fused backward, forwards first, and the
// in-flight limits above. Throws plait::Error with the reason when the family does not fit.
Schedule heterogeneous_schedule(const ScheduleFamily& family, const HeterogeneousPipeline& pipeline,
                                const HeterogeneousCosts& costs);
Schedule heterogeneous_schedule(std::string_view family, const HeterogeneousPipeline& pipeline,
                                const HeterogeneousCosts& costs);

}  // namespace plait::schedule
