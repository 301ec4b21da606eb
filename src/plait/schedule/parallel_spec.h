#pragma once
// The "parallel" section of a plait config, and of a plan file written by `plait plan`: how the
// model is cut into virtual stages, which rank holds which, the schedule every rank runs, and
// optional per-rank device emulation. The runtime runs it (runtime/parallel_config.h adds the
// train section around it) and the planner writes and predicts it (plan/plan_file.h), so both
// read and write it here. The contract between them
// is docs/config.md ("parallel"), which documents every field.
//
// Two forms, told apart by their fields:
//   generated (homogeneous): {"schedule", "pp", "dp", "chunks", "layers", "split"}: a schedule
//     family generates one pipeline of pp ranks over m = train.microbatches micro-batches;
//     schedule::replicate makes dp copies (rank = replica * pp + pipeline rank).
//   explicit (heterogeneous): {"rank_vstages", "layers", "schedule_text", "schedule_name",
//     "split"}: the layout and every rank's action list are given; train.microbatches is the
//     GLOBAL count M.
// Both may carry "devices": one {"type", "slowdown", "memory_bytes", "host_memory_bytes"} per
// rank; "recompute": "none" (default), "full", n (the first n layers of every virtual stage) or
// [n0, n1, ...] (per virtual stage; what the planner writes), spec/recompute.h; and sharded data
// parallelism inside each stage's group: "shard" (ZeRO level 0-3, one for every virtual stage or
// a list with one per stage), "offload" (true/false or "none" | "optimizer" | "activations" |
// "all" likewise) and "shard_shares" ("equal" or
// "memory": shards proportional to the holders' memory_bytes); spec/sharded_state.h defines what
// each level shards; "tp": the tensor-parallel degree, one for every virtual stage or one per
// virtual stage (the simulator, the planner and the runtime all run either).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/core/json_fields.h"
#include "plait/schedule/schedule.h"
#include "plait/spec/recompute.h"

namespace plait::schedule {

// A device a rank pretends to be: its compute takes `slowdown` times as long (padded by timed
// sleeps) and its memory accounting has `memory_bytes` capacity.
struct DeviceEmulation {
  std::string type = "host";
  double slowdown = 1.0;                    // >= 1
  std::optional<std::size_t> memory_bytes;  // none: unlimited
  // The host memory tier beside the device (offloaded optimizer state, parked weights); none:
  // no host tier (offload is refused).
  std::optional<std::size_t> host_memory_bytes;
  // The device <-> host link the copy engine paces its copies to (activation offload on CPU
  // ranks, where host and device are the same memory: core/thread_copy_engine.h); none: copies
  // run at memcpy speed. `plait plan` writes the cluster spec's host_gbyte_per_s here.
  std::optional<double> host_bytes_per_second;
};

struct ParallelSpec {
  enum class Form { generated, explicit_layout };
  Form form = Form::generated;

  // Generated form.
  std::string schedule = "seq1f1b";  // a schedule family name (schedule_family.h)
  int pp = 1;
  int dp = 1;
  int chunks = 0;  // 0: the family's fixed value (1, or 2 for zb-v; interleaved families need it)
  // Both forms: segment lengths when train.segments is a count: "even" (train's default) or
  // "flops" (equal forward FLOPs per segment, Seq1F1B's computation-wise partition; cut per
  // micro-batch from its documents with data.packing "documents"). Empty: not given.
  std::string split;

  // Explicit form.
  std::vector<std::vector<int>> rank_vstages;
  std::vector<std::string> schedule_text;
  std::string schedule_name;

  // Both: layers per virtual stage (empty in the generated form: as even as possible).
  std::vector<int> layers;
  // One per rank, or empty (no emulation).
  std::vector<DeviceEmulation> devices;
  // Activation recomputation per virtual stage; checked against the stages' layers where they
  // are known (runtime::build_pipeline_plan, the planner).
  spec::Recompute recompute;
  // The cluster devices the ranks run on ("a100-0:3"), one per rank in rank order, or empty.
  // Written by `plait plan`, read by `plait plan --evaluate` (a plan may leave devices out);
  // `plait train` does not use it (the launcher places the ranks).
  std::vector<std::string> cluster_devices;

  // Sharded data parallelism (docs/config.md, "Sharding and offload"): empty: level 0 / no
  // offload everywhere; one entry: every virtual stage; else one per virtual stage. "offload"
  // reads true/false (the optimizer state) or a level per stage, "none" | "optimizer" |
  // "activations" | "all", into the two flags: `offload` (optimizer state, ZeRO-Offload) and
  // `offload_activations` (a unit's saved activations between its F and its B,
  // runtime/activation_offload.h), always of the same length.
  std::vector<int> shard;
  std::vector<bool> offload;
  std::vector<bool> offload_activations;
  enum class Shares { equal, memory };
  Shares shard_shares = Shares::equal;
  int shard_level(int vstage) const;
  bool offloaded(int vstage) const;
  bool activations_offloaded(int vstage) const;
  // Tensor parallelism (spec/tensor_parallel_plan.h): the TP degree of each virtual stage; empty:
  // 1; one entry: every virtual stage; else one per virtual stage (a plan's choice per stage). A
  // rank is then a TP group of that many devices (runtime/pipeline_plan.h lays the job's ranks
  // out; adjacent stages of different degrees reshard their messages: runtime/reshard.h).
  std::vector<int> tp;
  int tensor_parallel(int vstage) const;
  int max_tensor_parallel() const;

  // Ranks the layout needs: pp * dp, or rank_vstages.size().
  int world_size() const;
};

// Reads the section strictly (InputErrors name the file and field, e.g.
// "plan.json: parallel.rank_vstages[2]: expected a non-empty list of virtual stages").
ParallelSpec parse_parallel_spec(const JsonFields& section);

// A "recompute" value: "none", "full", an integer n >= 0 or an array of them; anything else is
// an InputError naming `file` and `field`. (The CLI's --recompute reads its text through it.)
spec::Recompute parse_recompute(const nlohmann::json& value, const std::string& file, const std::string& field);
nlohmann::json to_json(const spec::Recompute& recompute);

// The sharding fields against the layout (which ranks hold which virtual stages): a list of
// shard levels or offload flags of another length than the virtual stages, a shard level above 0
// on a stage only one rank holds (no data parallelism to shard over), offload (of either kind) on
// a stage whose holders' devices give no host_memory_bytes, memory-proportional shares without every holder's
// memory_bytes. InputErrors name `file` and the field ("<file>: parallel.shard: ...").
void check_data_parallel(const ParallelSpec& spec, const Layout& layout, const std::string& file);

// The section as JSON, in the form it is in (parse_parallel_spec reads it back unchanged).
nlohmann::json to_json(const ParallelSpec& spec);

// The explicit form of a schedule: its layout, one text line per rank (docs/schedules.md, "-"
// for a rank without actions), `layers` per virtual stage and the label `name`; no devices.
ParallelSpec explicit_parallel_spec(const Schedule& schedule, std::vector<int> layers, std::string name);

// The schedule the section describes, not yet validated (schedule::validate): generated, the
// family's pipeline over `microbatches` per replica, replicated dp times; explicit, the layout and
// the parsed text with `microbatches` the global count. Errors are InputErrors naming `file` and
// the field: "<file>: parallel.schedule: <why the family cannot run this shape>", "<file>:
// parallel.schedule_text[r]: line 1, column C: ...", "<file>: parallel.rank_vstages: schedule
// layout: ...".
Schedule parallel_schedule(const ParallelSpec& spec, int microbatches, int segments, const std::string& file);

}  // namespace plait::schedule
