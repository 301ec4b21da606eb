#pragma once
// Measures how long the engine takes for each piece of a pipeline unit on this machine, with the
// threads the caller has set (the runtime runs one OpenMP thread per rank when ranks share a
// host), by running real StageModels on random data:
//   - one transformer layer, the embedding, and the head (final LayerNorm + LM head + loss), each
//     for every segment of a sequence partition (attention cost depends on the segment's prefix,
//     so it is MEASURED per segment, not modelled), split into F, B and W, and, if asked, what a
//     recomputed layer's B costs more;
//   - one layer's F and B+W for whole sequences at micro-batch sizes 1..N, the samples of a
//     Zorse-shaped latency table (sim/latency_table.h), with the head and embedding alike.
// Each time is the median of `repeats` runs after one warm-up run. A layer's time is the time of
// a probe stage of `probe_layers` layers divided by that count (one stage call per unit, as the
// runtime makes them).
// Under tensor parallelism (ProfileOptions::tensor_parallel) the probe is one rank's part of a
// TP stage, on its sequence slice, over a stand-in group that moves no data: the per-rank compute
// of a TP unit (its 1/t share at the per-rank work, as the simulator charges it). The collectives
// are the link's, added by the cost model (profile_cost_model.h, spec::tp_collectives).
#include <vector>

#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"
#include "plait/spec/unit_memory.h"

namespace plait::runtime {

struct UnitTimes {
  double forward = 0;          // seconds
  double backward_input = 0;   // B
  double backward_weight = 0;  // W
  // What a recomputed layer's B costs more (its rebuild, model/block.h), when measured
  // (ProfileOptions::recompute): the median B of a probe whose layers all recompute minus the
  // median B of the plain probe, at least 0.
  double recompute = 0;
  double backward() const { return backward_input + backward_weight; }
};

// Per segment (index = segment): one layer, the embedding, the head.
struct SegmentProfile {
  spec::ModelSpec model;
  int microbatch_size = 1;
  int tensor_parallel = 1;  // the TP degree whose per-rank units these are
  spec::SequencePartition partition;
  std::vector<UnitTimes> layer, embedding, head;
};

struct ProfileOptions {
  int repeats = 5;
  int probe_layers = 2;
  // Micro-batches held at once: micro-batch r's forwards run before the backwards of
  // r - (in_flight - 1), as in a 1F1B steady state (1: each backward right after its forward).
  int in_flight = 2;
  // > 1: idle (slowdown - 1) times each unit's duration after it, as a rank emulating a device
  // that much slower does (device_emulator.h), so units start with caches as cold as there.
  double slowdown = 1;
  // Run a micro-batch's W after the next micro-batch's F and B (zero-bubble order) instead of
  // right after its own B.
  bool defer_weight = false;
  // Also time the layer probe with every layer recomputed (UnitTimes::recompute).
  bool recompute = false;
  // The engine's precision (spec/precision_policy.h): in bf16 the probe stage computes in bf16
  // mixed precision and its inputs and gradients are bf16, as in a bf16 run.
  spec::Precision precision = spec::Precision::fp32;
  // The probe is rank tp_rank of a TP group of this many (above): its compute alone.
  int tensor_parallel = 1;
  int tp_rank = 0;
  // Time each unit as an emulated device counts an action (device_emulator.h): the thread's CPU
  // time when below the wall time (one compute thread per rank), so a unit's time does not hold
  // its waits for a core that other ranks share; else the wall time.
  bool cpu_time = false;
};

SegmentProfile profile_segments(const spec::ModelSpec& model, int microbatch_size,
                                const spec::SequencePartition& partition,
                                const ProfileOptions& options = {});

// Whole sequences of `seq` tokens at micro-batch sizes 1..max_batch.
struct BatchProfile {
  int seq = 0;
  std::vector<UnitTimes> layer, embedding, head;  // index b-1
};

BatchProfile profile_batches(const spec::ModelSpec& model, int seq, int max_batch,
                             const ProfileOptions& options = {});

}  // namespace plait::runtime
