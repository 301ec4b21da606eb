#pragma once
// One simulation end to end: a model, a sequence split, a device per rank, and a schedule (from
// a family or given as a value) -> validated, lowered, timed, with memory per rank.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plait/core/search_progress.h"
#include "plait/schedule/schedule.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/device_profile.h"
#include "plait/sim/document_cost_model.h"
#include "plait/sim/event_simulator.h"
#include "plait/sim/flops_cost_model.h"
#include "plait/sim/link_matrix.h"
#include "plait/sim/memory_model.h"
#include "plait/spec/model_presets.h"
#include "plait/spec/sequence_partition.h"
#include "plait/trace/event.h"

namespace plait::sim {

struct SimulationConfig {
  spec::NamedModel model;
  std::int64_t seq = 4096;
  int microbatch_size = 1;
  schedule::PipelineShape shape;  // stages, chunks, micro-batches, segments
  // How the sequence is cut into shape.segments segments (spec::cut_sequence), unless
  // `partition` is given (its lengths must then be shape.segments and sum to seq; schedules of
  // one segment still run the whole sequence). split_multiple rounds a flops split's lengths
  // (the Seq1F1B reference rounds to the tensor-parallel size, 8 in its scripts).
  spec::SplitMethod split = spec::SplitMethod::flops;
  std::int64_t split_multiple = 1;
  spec::SequencePartition partition;
  std::vector<DeviceProfile> devices;  // one for every rank, or one per rank; empty: default
  // Precision (bf16 by default: GPU runs; messages between stages carry its activation
  // elements), the layers each virtual stage recomputes (B or BW pays their rebuild) and a CPU
  // rank's threads.
  MemoryOptions memory;
  bool record_events = true;
  // Model DualPipe's overlap of a pair's forward and backward (SimOptions::overlap_pairs,
  // unvalidated): simulate_family applies it only to families whose pairs are meant to overlap
  // (ScheduleFamily::overlapped_pairs, DualPipeV); simulate_schedule to any schedule.
  bool overlap_pairs = false;
  // Heterogeneous clusters (all optional): layers of each virtual stage (empty: as even as
  // possible, split_layers) and per-pair links (empty: each sender's device link).
  std::vector<int> vstage_layers;
  LinkMatrix links;
  // Tensor parallelism (spec/tensor_parallel_plan.h): each rank is a TP group of this many
  // devices (one entry: every rank; empty: 1), whose collectives ring over tensor_parallel_links
  // (one per rank, or one for all; empty: each rank's device machine_link). Every rank holding a
  // virtual stage must have the same degree; segment lengths must divide by it (sequence
  // parallelism: cut with split_multiple a multiple of it).
  std::vector<int> tensor_parallel;
  std::vector<LinkProfile> tensor_parallel_links;
  // Activation offload per rank (SimOptions::activation_offload); empty: none.
  ActivationOffloadModel activation_offload;
  // Packed documents (document_cost_model.h): each micro-batch's units timed from their own
  // tokens and visited pairs, [micro-batch][segment]; empty: every micro-batch full causal rows.
  MicrobatchWork microbatch_work;
  int tensor_parallel_of(int rank) const {
    if (tensor_parallel.empty()) return 1;
    return tensor_parallel.size() == 1 ? tensor_parallel.front() : tensor_parallel.at(static_cast<std::size_t>(rank));
  }
  // Told of each phase as it starts ("<schedule>: generating the schedule", 0 of 4; validating,
  // lowering, timing), for plait sim's progress line.
  SearchProgress progress;
};

// What a simulation of `shape` holds in memory, estimated before it runs from the work it has:
// units = stages x chunks x micro-batches x segments (each an F, B and W, or F and BW, on one
// rank). Measured with plait sim on this machine (docs/simulator.md, "Memory of a simulation"):
// 174-262 bytes per unit of peak RSS growth for every family (zb-v the most: it simulates two
// orders), 568-837 with events recorded for --trace/--html; the estimate takes 270 and 900.
inline constexpr double kSimulationBytesPerUnit = 270;
inline constexpr double kSimulationBytesPerUnitWithEvents = 900;
double simulation_memory_bytes(const schedule::PipelineShape& shape, bool record_events);

struct PhaseSeconds {
  double generate = 0, validate = 0, lower = 0, simulate = 0;
  double total() const { return generate + validate + lower + simulate; }
};

struct SimulationReport {
  std::string schedule_name;
  schedule::Schedule schedule;
  spec::SequencePartition partition;
  std::vector<int> vstage_layers;
  std::vector<DeviceProfile> devices;  // as resolved (one, or one per rank)
  SimResult result;
  std::vector<StaticMemory> static_memory;  // per rank
  double tokens_per_step = 0;
  double model_flops_per_step = 0;  // 3 x the forward FLOPs formula, all micro-batches
  PhaseSeconds seconds;
  // For a family that builds its order for the costs (ScheduleFamily::generate_for_costs): which
  // order was kept, and the step of each {F = B = W order, order built for these costs}.
  std::string order;
  std::pair<double, double> order_steps{0, 0};

  // Devices of the run: the sum of the ranks' TP degrees.
  int devices_used = 0;

  double peak_total_bytes(int rank) const {
    return static_memory[rank].total() + result.ranks[rank].peak_activation_bytes;
  }
  const DeviceProfile& device(int rank) const {
    return devices.size() == 1 ? devices[0] : devices[static_cast<std::size_t>(rank)];
  }
};

// The cost model the simulation times `report`'s layout with (ranks: the schedule's).
FlopsCostModel cost_model(const SimulationConfig& config, const SimulationReport& report, int ranks);

// Generates the family's schedule for config.shape, then simulate_schedule(). A family that
// builds its order for the costs (ZB-V) is also built for this simulation's costs, and the faster
// of the two orders is reported (report.order says which).
SimulationReport simulate_family(const SimulationConfig& config, const schedule::ScheduleFamily& family);

// Validates (throws schedule::ScheduleViolationError), lowers and simulates `schedule`;
// config.shape is ignored in favour of the schedule's layout.
SimulationReport simulate_schedule(const SimulationConfig& config, schedule::Schedule schedule,
                                   std::string name);

// The report as a timeline for the trace writers.
trace::Timeline make_timeline(const SimulationConfig& config, const SimulationReport& report);

}  // namespace plait::sim
