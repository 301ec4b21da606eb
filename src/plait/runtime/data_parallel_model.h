#pragma once
// A plan's data parallelism for the simulator (sim/data_parallel_timing.h): every virtual
// stage's sharding policy, holders, buffer and shards (the plan's own bounds), the tied
// embedding's all-reduce, and what the update costs on this machine.
#include "plait/comm/communicator.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/sim/data_parallel_timing.h"

namespace plait::runtime {

struct UpdateCosts {
  double device_seconds_per_element = 0;  // AdamW on the device
  double host_seconds_per_element = 0;    // AdamW on the host tier (offload)
  double copy_bytes_per_second = 0;       // the copy engine between them (0: free)
  double commit_bytes_per_second = 0;     // committing fresh memory, first touch included (0: free)
  // Measured collectives over the stage groups, seconds per byte of the buffer (0: the ring over
  // the cost model's links).
  double all_reduce_seconds_per_byte = 0, reduce_scatter_seconds_per_byte = 0, all_gather_seconds_per_byte = 0;
};

sim::DataParallelModel data_parallel_model(const PipelinePlan& plan, const UpdateCosts& costs);

// Measures, on this rank, AdamW's seconds per element (the median of `repeats` updates of
// `elements`: use the size of a stage, since AdamW is memory-bound and a small buffer stays in
// the caches), the copy engine's bytes per second and the commit rate (CPU ranks: device and
// host alike), and, over `group` (every rank calls it), the three collectives on `elements`
// floats.
UpdateCosts measure_update_costs(comm::Communicator& group, std::size_t elements, int repeats = 3);

}  // namespace plait::runtime
