#pragma once
// What the simulator predicts a plan's ranks hold, by memory category, for comparison with the
// runtime's trackers (plait bench runtime memory, tests/runtime/mpi/sharded_memory_test.cpp):
// sim::simulate over the plan's schedule with the engine's exact unit memory (fp32, the CPU
// engine; the stages' recomputation as planned) and each rank's chunks under their stages' sharding, sized by the plan's own shard
// bounds (spec/sharded_state.h through sim::MemoryModel::chunk_state: the formula the planner
// sums too).
#include <string>
#include <vector>

#include "plait/runtime/pipeline_plan.h"
#include "plait/sim/event_simulator.h"
#include "plait/sim/sharded_memory.h"

namespace plait::runtime {

// The plan's activation offload for the simulator (sim::ActivationOffloadModel): each rank's
// chunks that offload, and its device's host link (0 where the plan gives none: unpaced).
sim::ActivationOffloadModel activation_offload_model(const PipelinePlan& plan);

// Per rank (one thread per rank: the attention workspace's size), with the plan's activation
// offload (the copies' timing does not change memory).
// `partition`: the cut to plan for (worst_case_partition, microbatch_partition.h, when cuts change
// per micro-batch); null: the plan's.
std::vector<sim::CategoryPeaks> predicted_memory(const PipelinePlan& plan, int threads = 1,
                                                 const spec::SequencePartition* partition = nullptr);

// Before a running job switches from plan `now` to `next` (a re-balanced schedule, a moved layer
// partition: share_rebalancer.h, layer_mover.h): "" when every rank whose device gives a capacity
// (DeviceEmulation::memory_bytes) fits `next`, else why not ("rank 0's predicted peak ... would
// exceed its device's ... (... with the plan in force)"). A rank fails only when its predicted
// peak under `next` exceeds its capacity AND grows past its prediction under `now`, so the
// check does not depend on the model's absolute error: a change that grows no rank's predicted
// peak passes. Without any capacity, nothing is simulated.
std::string capacity_exceeded(const PipelinePlan& next, const PipelinePlan& now);

// The comm_buffers bytes data parallelism holds on `rank` at most (runtime/sharded_chunk.h,
// sharded_data_parallel.h): the tied table's reduction buffer (V x C in the reduction's type) when
// the table is split over stages held by several ranks, plus, under train.grad_reduce "bf16", the
// bf16 wire copy of each chunk held by several ranks (its elements but the tied range), all of
// them in flight at once in the worst case (exact with one chunk). The pipeline's message
// buffers are not counted.
double predicted_dp_comm_bytes(const PipelinePlan& plan, int rank);

// The share of virtual stage `vstage`'s elements that holder `rank` owns under the plan's
// sharding (1 at level 0 or alone).
double shard_fraction(const PipelinePlan& plan, int vstage, int rank);

}  // namespace plait::runtime
