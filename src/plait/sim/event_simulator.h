#pragma once
// The discrete-event simulator: runs every rank's lowered program in order, in O(operations).
// A compute takes the cost model's time; a send leaves at the rank's current time (queued behind
// the rank's earlier sends on its one outgoing port) and arrives latency + bytes / bandwidth
// later, without blocking the sender (receives are posted ahead, as the runtime will do); a
// receive waits until its message has arrived. Memory follows the units: a unit's activations
// and K/V prefix are taken when its F starts, B frees what W does not need, W (or BW) frees the
// rest.
//
// Outputs: step time (the last rank's finish), per-rank busy time and idle time, bubble fraction
// (idle share of ranks x step time), per-rank peak activation bytes (held between actions, and
// as allocated, with what lives inside an action: AllocatedPeaks) and peak in-flight
// activations in micro-batches (a unit weighs its share of the sequence divided by the rank's
// chunk count), and the timed events.
#include <cstdint>
#include <vector>

#include "plait/schedule/lowering.h"
#include "plait/schedule/schedule.h"
#include "plait/sim/cost_model.h"
#include "plait/sim/data_parallel_timing.h"
#include "plait/sim/memory_model.h"
#include "plait/sim/sharded_memory.h"
#include "plait/trace/event.h"

namespace plait::sim {

// Activation offload (schedule/activation_offload.h; runtime/activation_offload.h runs the same
// table): per rank, whether each of its chunks offloads its activations, and its host link. A
// moved unit's forward_activations (spec::UnitMemory) leave the device at its release and come
// back at its prefetch; each copy takes bytes / host_bytes_per_second on the rank's one copy
// engine (in submission order, beside compute), and the rank waits where the runtime waits: at
// the release for the copy out, at the B for the copy back (a late prefetch stalls it). The host
// tier holds a unit's bytes from its copy out to its B (CategoryPeaks::host_activations).
//
// CPU ranks only: `compute_seconds_per_byte` charges each copy's bytes (out and back) to the
// rank's compute, added to the duration of the rank's next compute action. On a CPU rank the copy
// engine is a thread (core/thread_copy_engine.h) whose memcpy runs beside the compute threads on
// the same cores: the copy out is submitted right after the F and the copy back right before the
// action ahead of the B, so each memcpy runs during the rank's next action and takes its core time
// from it. (Which compute thread the scheduler takes the core from is not fixed; charging the
// rank's own is exact on average when the ranks copy alike.) A GPU's copy engine is a DMA unit
// beside the SMs: 0 there, and by default, which leaves every result unchanged.
struct ActivationOffloadModel {
  std::vector<std::vector<bool>> chunk_offloads;  // [rank][chunk]
  std::vector<double> host_bytes_per_second;      // per rank; 0 (or missing): copies take no time
  std::vector<double> compute_seconds_per_byte;   // per rank; 0 (or missing): copies take no compute
};

struct SimOptions {
  bool record_events = true;
  bool record_sends = true;
  // Each rank's chunks under their stages' sharding (sharded_memory.h): with a memory model, the
  // replay of weights, gradients and optimizer state joins the activations in RankResult::memory.
  const ChunkStates* chunk_states = nullptr;
  // The stages' collectives and the optimizer update (data_parallel_timing.h): level-3 gathers
  // gate each holder's first use of its stage, and SimResult::synchronized_step_time ends the
  // step after the reductions, the update and the weights' all-gathers.
  const DataParallelModel* data_parallel = nullptr;
  // DualPipe's overlap (DeepSeek-V3 report, arXiv 2412.19437 sec. 3.2.1), UNVALIDATED until a GPU
  // backend runs it: an F immediately followed on its rank by a backward (B or BW) of another chunk
  // is a pair whose backward may start as soon as the F starts and its own input has arrived, the
  // two sharing the device at full speed (the pair ends at the later of the two ends). That is the
  // best case of the overlap, an upper bound on what it gains; CPU ranks run the pair in order
  // (the default). Busy time counts the pair's span once.
  bool overlap_pairs = false;
  // Activation offload (with a memory model: the bytes it moves come from it); null: none.
  const ActivationOffloadModel* activation_offload = nullptr;
};

// A rank's activations and K/V as the engine allocates them, action by action from the exact
// unit table (spec::UnitMemory): each action's own peak inside it (a layer's backward outputs
// and scratch, a recomputed layer's rebuild, the head's per-token losses) and a micro-batch's
// dK/dV accumulators from its first backward on. The memory tracker's peaks per category and of
// their sum; 0 without a memory model.
struct AllocatedPeaks {
  double activations = 0.0, kv_cache = 0.0, total = 0.0;
};

struct RankResult {
  double busy = 0.0;
  double finish = 0.0;
  // Activations + K/V held between actions (what the units keep; 0 without a memory model).
  double peak_activation_bytes = 0.0;
  double peak_in_flight = 0.0;         // micro-batches of activations
  double step_end = 0.0;               // with SimOptions::data_parallel: its update done
  double offload_wait = 0.0;           // activation offload: waiting for a copy out or back
  double offload_bytes = 0.0;          // activation offload: bytes copied out (and back)
  // Activation offload on CPU ranks: compute time charged for the copies (in `busy`;
  // ActivationOffloadModel::compute_seconds_per_byte).
  double offload_compute = 0.0;
  AllocatedPeaks allocated;
  // Peaks by category: activations and K/V as `allocated`; with SimOptions::chunk_states also the
  // static categories, the device total with them and the host tier (sharded_memory.h).
  CategoryPeaks memory;
};

struct SimResult {
  double step_time = 0.0;
  // With SimOptions::data_parallel: the step's end after the reductions, the update and the
  // weights' all-gathers (step_time otherwise).
  double synchronized_step_time = 0.0;
  double bubble_fraction = 0.0;
  std::vector<RankResult> ranks;
  std::vector<trace::Event> events;
  double idle(int rank) const { return step_time - ranks[rank].busy; }
};

// `memory` may be null (then segments count 1/k each and bytes stay 0). Throws plait::Error if
// the program cannot finish (validate first).
SimResult simulate(const schedule::Schedule& schedule, const schedule::LoweredSchedule& lowered,
                   const CostModel& cost, const MemoryModel* memory, const SimOptions& options = {});

}  // namespace plait::sim
