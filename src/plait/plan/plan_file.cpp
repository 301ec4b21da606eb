#include "plait/plan/plan_file.h"

#include <algorithm>
#include <map>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/schedule/parallel_spec.h"
#include "plait/schedule/validator.h"
#include "plait/sim/stage_layers.h"
#include "plait/spec/model_spec_json.h"
#include "plait/spec/sequence_partition.h"

namespace plait::plan {

nlohmann::json plan_file_json(const PlanningProblem& problem, const Plan& plan, const nlohmann::json* base) {
  const spec::ModelSpec& shape = problem.model.model;
  const PlanChoice& choice = plan.choice;
  nlohmann::json doc = nlohmann::json::object();
  doc["model"] = spec::model_spec_json(shape);
  nlohmann::json train = nlohmann::json::object();
  if (base && base->contains("train")) train = (*base)["train"];
  if (!train.contains("steps")) train["steps"] = 10;
  train["seq"] = problem.seq;
  train["microbatch_size"] = choice.microbatch_size;
  train["microbatches"] = choice.num_microbatches;
  // Planned for packed documents with a flops split: a count, cut per micro-batch from its
  // documents at run time (parallel.split "flops" below), as the plan's worst case assumed.
  const bool document_cuts = problem.documents && choice.segments > 1 && choice.split == spec::SplitMethod::flops;
  if (document_cuts) {
    train["segments"] = choice.segments;
  } else if (choice.segments > 1) {
    train["segments"] = plan_partition(problem, choice).lengths;
  } else {
    train["segments"] = 1;
  }
  // The precision the plan's memory model assumed: plait train runs it so (mixed16 = bf16).
  train["precision"] = problem.cluster.precision == Precision::bf16 ? "bf16" : "fp32";
  // ... and what its gradient synchronisation moved (the cluster's grad_reduce; fp32 unsaid).
  if (problem.cluster.grad_reduce == spec::GradReduce::bf16) train["grad_reduce"] = "bf16";
  doc["train"] = train;
  // The base's other sections (data, checkpoint, stragglers, init, ...) are the run's, not the
  // plan's: taken over as they are.
  if (base && base->is_object()) {
    for (const auto& [key, value] : base->items()) {
      if (key != "model" && key != "train" && key != "parallel") doc[key] = value;
    }
  }
  if (problem.documents) {
    // The packing and order the plan was made for.
    nlohmann::json& data = doc["data"];
    if (!data.is_object()) data = nlohmann::json::object();
    data["packing"] = "documents";
    const int window = problem.documents->planning().balance_window;
    if (window > 0) {
      data["balance"] = "wlb";
      data["balance_window"] = window;
    } else {
      data.erase("balance");
      data.erase("balance_window");
    }
  }

  schedule::ParallelSpec parallel = schedule::explicit_parallel_spec(plan.schedule, choice.vstage_layers, choice.family);
  parallel.recompute = choice.recompute();
  for (int d : choice.rank_devices()) {
    parallel.cluster_devices.push_back(problem.cluster.device_name(d));
    if (!problem.cluster.emulated) continue;
    const DeviceType& t = problem.cluster.type_of(d);
    schedule::DeviceEmulation e{t.name, t.slowdown, static_cast<std::size_t>(t.memory_bytes), {}};
    if (t.host_memory_bytes > 0) {
      e.host_memory_bytes = static_cast<std::size_t>(t.host_memory_bytes);
      // The link the copy engine paces offload copies to (core/thread_copy_engine.h).
      e.host_bytes_per_second = t.host_bytes_per_second;
    }
    parallel.devices.push_back(std::move(e));
  }
  // The planner's sharding choice, per virtual stage (each stage is its group's).
  if (!choice.shard.empty()) {
    parallel.shard.assign(choice.vstage_layers.size(), 0);
    parallel.offload.assign(choice.vstage_layers.size(), false);
    for (int g = 0; g < choice.num_groups(); ++g) {
      for (std::int32_t v : choice.group_vstages(g)) {
        parallel.shard[static_cast<std::size_t>(v)] = choice.shard[static_cast<std::size_t>(g)].level;
        parallel.offload[static_cast<std::size_t>(v)] = choice.shard[static_cast<std::size_t>(g)].offload;
      }
    }
    if (choice.memory_shares) parallel.shard_shares = schedule::ParallelSpec::Shares::memory;
  }
  if (!choice.offload_activations.empty()) {
    parallel.offload_activations.assign(choice.vstage_layers.size(), false);
    if (parallel.offload.empty()) parallel.offload.assign(choice.vstage_layers.size(), false);
    for (int g = 0; g < choice.num_groups(); ++g) {
      for (std::int32_t v : choice.group_vstages(g)) {
        parallel.offload_activations[static_cast<std::size_t>(v)] = choice.offloads_activations(g);
      }
    }
  }
  // Tensor parallelism per virtual stage (each stage is its group's); a rank is then the TP group
  // of t devices from its cluster device on.
  if (choice.tensor_parallel()) parallel.tp = choice.vstage_tensor_parallel();
  if (document_cuts) parallel.split = "flops";
  doc["parallel"] = schedule::to_json(parallel);
  return doc;
}

LoadedPlan read_plan_file(const std::string& path, const ClusterSpec& cluster) {
  const nlohmann::json doc = read_json_file(path);
  const JsonFields top(doc, path);
  const JsonFields train = top.object("train");
  top.raw("model");  // read by spec::resolve_model below
  if (top.has("data")) top.raw("data");  // the runtime's
  LoadedPlan out;
  out.seq = train.integer_in("seq", 1, 1 << 24);
  out.model = spec::resolve_model(path, out.seq);
  const spec::ModelSpec& shape = out.model.model;
  const int b = static_cast<int>(train.integer_in("microbatch_size", 1, 1 << 16));
  const int m = static_cast<int>(train.integer_in("microbatches", 1, 1 << 24, 1));
  const JsonFields par = top.object("parallel");
  const schedule::ParallelSpec parallel = schedule::parse_parallel_spec(par);
  // A count of segments is cut by parallel.split, as the runtime cuts it (runtime::JobConfig).
  spec::SegmentRequest request = spec::read_segment_request(train, out.seq);
  if (!parallel.split.empty()) request.split = spec::parse_split_method(parallel.split);
  const std::vector<std::int64_t> lengths = spec::cut_sequence(shape, out.seq, request).lengths;
  const int k = static_cast<int>(lengths.size());
  PlanChoice& choice = out.choice;
  choice.microbatch_size = b;
  choice.segments = k;
  schedule::Schedule& s = out.schedule;
  s = schedule::parallel_schedule(parallel, m, k, path);
  if (parallel.form == schedule::ParallelSpec::Form::generated) {
    choice.family = parallel.schedule;
    choice.vstage_layers = parallel.layers.empty() ? sim::split_layers(shape.layers, s.layout.num_vstages) : parallel.layers;
  } else {
    choice.family = parallel.schedule_name;
    choice.vstage_layers = parallel.layers;
  }
  top.check_no_unknown_fields();

  int layer_sum = 0;
  for (int l : choice.vstage_layers) layer_sum += l;
  if (static_cast<std::int32_t>(choice.vstage_layers.size()) != s.layout.num_vstages || layer_sum != shape.layers) {
    par.fail("layers", "expected " + std::to_string(s.layout.num_vstages) + " layer counts summing to model.layers " +
                           std::to_string(shape.layers) + ", found " + std::to_string(choice.vstage_layers.size()) +
                           " summing to " + std::to_string(layer_sum));
  }
  if (auto v = schedule::validate(s)) par.fail("schedule_text", schedule::summary(s, *v));
  try {
    choice.recompute_layers = parallel.recompute.resolve(choice.vstage_layers);
  } catch (const Error& e) {
    par.fail("recompute", e.what());
  }
  if (!choice.recomputes()) choice.recompute_layers.clear();
  const int ranks = s.num_ranks();
  if (ranks > cluster.num_devices()) {
    par.fail("rank_vstages", "the plan has " + std::to_string(ranks) + " ranks but " + cluster.path + " has " +
                                 std::to_string(cluster.num_devices()) + " devices");
  }

  // The cluster device of every rank: parallel.cluster_devices (a plan may leave devices out, and
  // ranks follow cluster-file order), else rank r on device r.
  std::vector<int> device_of(ranks);
  for (int r = 0; r < ranks; ++r) device_of[r] = r;
  if (!parallel.cluster_devices.empty()) {
    for (int r = 0; r < ranks; ++r) {
      const std::string& name = parallel.cluster_devices[r];
      const std::string field = "cluster_devices[" + std::to_string(r) + "]";
      int found = -1;
      for (int d = 0; d < cluster.num_devices() && found < 0; ++d) {
        if (cluster.device_name(d) == name) found = d;
      }
      if (found < 0) par.fail(field, cluster.path + " has no device '" + name + "'");
      if (r > 0 && found <= device_of[r - 1]) {
        par.fail(field, "expected the ranks' devices in cluster-file order, each once; '" + name + "' comes before '" +
                            parallel.cluster_devices[r - 1] + "' in " + cluster.path);
      }
      device_of[r] = found;
    }
  }

  // Stage groups: ranks holding the same virtual stages, ordered by their first stage; a rank's
  // micro-batches are those its first chunk runs forward.
  std::map<std::vector<std::int32_t>, int> group_of;
  std::vector<std::vector<std::int32_t>> keys;
  for (int r = 0; r < ranks; ++r) {
    if (group_of.emplace(s.layout.rank_vstages[r], 0).second) keys.push_back(s.layout.rank_vstages[r]);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return *std::min_element(a.begin(), a.end()) < *std::min_element(b.begin(), b.end());
  });
  for (std::size_t g = 0; g < keys.size(); ++g) group_of[keys[g]] = static_cast<int>(g);
  choice.groups.resize(keys.size());
  choice.held = keys;
  for (int r = 0; r < ranks; ++r) {
    StageGroup& g = choice.groups[group_of[s.layout.rank_vstages[r]]];
    g.devices.push_back(device_of[r]);
    g.microbatches.push_back(static_cast<int>(std::count_if(s.ranks[r].begin(), s.ranks[r].end(), [](const auto& a) {
      return a.kind == schedule::ActionKind::F && a.segment == 0 && a.chunk == 0;
    })));
  }
  // The sharding the file asks for, per group (its stages share one policy: the first's).
  // (An offload list of false alone comes with activation offload's levels: no sharding choice.)
  const bool optimizer_offload = std::find(parallel.offload.begin(), parallel.offload.end(), true) != parallel.offload.end();
  if (!parallel.shard.empty() || optimizer_offload) {
    for (const auto& held : keys) {
      const int v = *std::min_element(held.begin(), held.end());
      choice.shard.push_back({parallel.shard_level(v), parallel.offloaded(v)});
    }
    choice.memory_shares = parallel.shard_shares == schedule::ParallelSpec::Shares::memory;
  }
  if (!parallel.offload_activations.empty()) {
    for (const auto& held : keys) choice.offload_activations.push_back(parallel.activations_offloaded(*std::min_element(held.begin(), held.end())));
  }
  // Tensor parallelism per group (its stages share one degree: the first's).
  for (std::size_t g = 0; g < keys.size(); ++g) {
    choice.groups[g].tp = parallel.tensor_parallel(*std::min_element(keys[g].begin(), keys[g].end()));
    for (std::int32_t v : keys[g]) {
      if (parallel.tensor_parallel(v) != choice.groups[g].tp) {
        par.fail("tp", "virtual stages " + std::to_string(keys[g].front()) + " and " + std::to_string(v) +
                           " are held by the same ranks but have different tensor-parallel degrees");
      }
    }
    for (int lead : choice.groups[g].devices) {
      if (choice.groups[g].tp > 1 && tp_members(cluster, lead, choice.groups[g].tp).empty()) {
        par.fail("tp", "the rank on " + cluster.device_name(lead) + " needs " + std::to_string(choice.groups[g].tp) +
                           " devices of one type in one machine from it on");
      }
    }
  }
  choice.split_multiple = parallel.max_tensor_parallel();
  choice.chunks = s.layout.max_chunks();
  choice.num_microbatches = s.layout.num_microbatches;
  out.global_batch = static_cast<std::int64_t>(choice.num_microbatches) * b;
  if (lengths == spec::even_partition(shape, out.seq, k).lengths) {
    choice.split = spec::SplitMethod::even;
  } else if (lengths == spec::flops_partition(shape, out.seq, k).lengths) {
    choice.split = spec::SplitMethod::flops;
    choice.split_multiple = 1;
  } else if (choice.split_multiple > 1 && lengths == spec::flops_partition(shape, out.seq, k, choice.split_multiple).lengths) {
    choice.split = spec::SplitMethod::flops;  // rounded to the TP degree
  } else {
    train.fail("segments", "predictions need even or equal-FLOPs segment lengths (spec::cut_sequence)");
  }
  return out;
}

}  // namespace plait::plan
