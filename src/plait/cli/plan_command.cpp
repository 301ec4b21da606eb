// `plait plan`: plan a layout and schedule for a cluster of unlike devices (docs/planner.md):
// search stage groups, layers, micro-batch shares, schedule family, chunks and segments under
// every device's memory, print the chosen plan and the runner-ups, write the plan file that
// `plait train --config` runs. Also: --evaluate predicts an existing plan file on a cluster, and
// --flops-profile writes a provisional device profile from FLOPs alone.
#include <algorithm>
#include <functional>
#include <cstdio>
#include <memory>
#include <string>

#include "plait/cli/commands.h"
#include "plait/cli/flag_values.h"
#include "plait/cli/search_flags.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/data/document_distribution.h"
#include "plait/plan/cluster_spec.h"
#include "plait/plan/plan_file.h"
#include "plait/plan/plan_report.h"
#include "plait/plan/plan_simulation.h"
#include "plait/plan/planner.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/latency_table.h"
#include "plait/spec/model_presets.h"

namespace plait::cli {

namespace {

struct PlanOptions {
  std::string cluster, model, config, out;
  std::string global_batch, seq;
  std::string top = "5";
  std::string devices_of_type, schedule, microbatch_size;
  std::string max_stages = "16", simulate = "16", min_unit_tokens, tp;
  bool no_segments = false, no_recompute = false, no_shard = false, even = false, verbose = false;
  std::string evaluate, profile_model;
  std::string documents, document_steps = "8";
  std::string flops_profile, gflops, device_name = "cpu", dtype = "float32", max_microbatch = "8";
  SearchFlags search;
};

void require(const std::string& flag, const std::string& value) {
  if (value.empty()) throw Error(flag + ": required (see plait plan --help)");
}

// With --documents: plans for the worst micro-batch of packed documents (plan/plan_documents.h),
// read in the order the run's data section asks for (data.balance "wlb" and its window, or
// plain order); `config` is that run's config (or plan file), `file` its name.
void plan_documents(const PlanOptions& o, plan::PlanningProblem& problem, const nlohmann::json* config,
                    const std::string& file) {
  if (o.documents.empty()) return;
  plan::DocumentPlanning d;
  d.distribution = data::parse_document_distribution(o.documents, "--documents");
  d.steps = static_cast<int>(positive_flag("--document-steps", o.document_steps, 1024));
  if (config && config->contains("data")) {
    const JsonFields data = JsonFields(*config, file).object("data");
    // The plan file will pack documents, which plait train does for token shards only.
    if (data.has("paths") && !data.has("shards")) {
      data.fail("paths", "--documents plans for documents packed from token shards (data.packing \"documents\"), "
                         "and this run reads text paths; prepare shards with plait data prepare and give data.shards");
    }
    if (data.string("balance", "none") == "wlb") d.balance_window = static_cast<int>(data.integer_in("balance_window", 1, 1 << 20, 1));
  }
  problem.documents = std::make_shared<const plan::DocumentLoads>(std::move(d), problem.model.model, problem.seq,
                                                                  problem.global_batch);
}

void write_flops_profile(const PlanOptions& o) {
  require("--model", o.model);
  require("--seq", o.seq);
  require("--gflops", o.gflops);
  const std::int64_t seq = positive_flag("--seq", o.seq, std::int64_t{1} << 24);
  double gflops = 0;
  try {
    gflops = std::stod(o.gflops);
  } catch (const std::exception&) {
  }
  if (!(gflops > 0)) throw Error("--gflops: expected a positive number, found '" + o.gflops + "'");
  const spec::NamedModel model = spec::resolve_model(o.model, seq);
  const sim::LatencyEntry e = sim::flops_latency_entry(model.name, o.device_name, o.dtype, model.model, seq, gflops * 1e9,
                                                       static_cast<int>(positive_flag("--max-microbatch", o.max_microbatch, 1024)));
  write_json_file(o.flops_profile, sim::latency_table_json({e}));
  std::printf("wrote %s: provisional %s profile of %s at seq %lld from FLOPs at %.1f GFLOP/s (per layer: forward "
              "%.3f ms, backward %.3f ms per sample)\n",
              o.flops_profile.c_str(), o.device_name.c_str(), model.name.c_str(), static_cast<long long>(seq), gflops,
              e.forward_slope_ms, e.backward_slope_ms);
}

void evaluate(const PlanOptions& o) {
  plan::ClusterSpec cluster = plan::read_cluster_spec(o.cluster);
  if (!o.profile_model.empty()) cluster.profile_model = o.profile_model;
  plan::LoadedPlan loaded = plan::read_plan_file(o.evaluate, cluster);
  plan::PlanningProblem problem = plan::make_problem(cluster, loaded.model, loaded.global_batch, loaded.seq);
  const nlohmann::json plan_file = read_json_file(o.evaluate);
  plan_documents(o, problem, &plan_file, o.evaluate);
  plan::Plan p;
  p.choice = loaded.choice;
  p.schedule = std::move(loaded.schedule);
  p.prediction = plan::simulate_plan(problem, p.choice, p.schedule);
  std::fputs(plan::format_problem(problem).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fputs(plan::format_plan(problem, p, o.evaluate).c_str(), stdout);
  if (!p.prediction.fits) std::printf("  OVER MEMORY: %s\n", p.prediction.over_memory.c_str());
}

void run_plan(const PlanOptions& o) {
  if (!o.flops_profile.empty()) return write_flops_profile(o);
  require("--cluster", o.cluster);
  if (!o.evaluate.empty()) return evaluate(o);
  require("--model", o.model);
  require("--global-batch", o.global_batch);
  require("--seq", o.seq);
  const std::int64_t seq = positive_flag("--seq", o.seq, std::int64_t{1} << 24);
  const std::int64_t batch = positive_flag("--global-batch", o.global_batch, std::int64_t{1} << 30);
  plan::PlannerOptions options;
  options.top = static_cast<int>(positive_flag("--top", o.top, 100));
  options.max_groups = static_cast<int>(positive_flag("--max-stages", o.max_stages, 1024));
  options.simulate = static_cast<int>(positive_flag("--simulate", o.simulate, 1000));
  options.device_types = comma_list(o.devices_of_type);
  options.families = comma_list(o.schedule);
  for (const std::string& b : comma_list(o.microbatch_size)) {
    options.microbatch_sizes.push_back(static_cast<int>(positive_flag("--microbatch-size", b, 1 << 16)));
  }
  options.segments = !o.no_segments;
  if (!o.min_unit_tokens.empty()) {
    options.min_unit_tokens = o.min_unit_tokens == "0" ? 0 : positive_flag("--min-unit-tokens", o.min_unit_tokens, std::int64_t{1} << 40);
  }
  for (const std::string& t : comma_list(o.tp)) {
    options.tensor_parallel.push_back(static_cast<int>(positive_flag("--tp", t, 8)));
  }
  options.recompute = !o.no_recompute;
  options.shard = !o.no_shard;
  options.even = o.even;
  nlohmann::json base;
  if (!o.config.empty()) {
    base = read_json_file(o.config);
    const JsonFields top(base, o.config);  // a JSON object, or an InputError naming the file
    if (top.has("train")) top.object("train");
    if (top.has("data")) top.object("data");
  }

  plan::ClusterSpec cluster = plan::read_cluster_spec(o.cluster);
  if (!o.profile_model.empty()) cluster.profile_model = o.profile_model;
  spec::NamedModel model = spec::resolve_model(o.model, seq);
  // The devices planned for (all, or those of --devices-of-type) bound the search's memory.
  int devices = 0;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const std::string& type = cluster.type_of(d).name;
    const auto& only = options.device_types;
    devices += only.empty() || std::find(only.begin(), only.end(), type) != only.end() ? 1 : 0;
  }
  check_memory_estimate(o.search, plan::planner_memory_bytes(devices), "this search",
                        "a bound for " + std::to_string(devices) + " devices: two 16-byte links per pair of them while a "
                        "plan is simulated, 200 KiB per device and 96 MiB besides; docs/planner.md",
                        "plan a part of the cluster (--devices-of-type), or on a machine with more memory");
  plan::PlanningProblem problem =
      plan::make_problem(std::move(cluster), std::move(model), batch, seq, options.device_types);
  plan_documents(o, problem, o.config.empty() ? nullptr : &base, o.config);
  ProgressLine progress(parse_progress_flag(o.search.progress));
  options.progress = progress.callback();
  const plan::PlannerResult result = plan::plan_cluster(problem, options);
  progress.finish();
  std::fputs(plan::format_result(problem, result, o.verbose).c_str(), stdout);
  if (!o.out.empty()) {
    write_json_file(o.out, plan::plan_file_json(problem, result.plans[0], o.config.empty() ? nullptr : &base));
    const plan::PlanChoice& chosen = result.plans[0].choice;
    // Per-stage degrees run too (boundary messages resharded: docs/runtime.md, "Tensor
    // parallelism"); the job's ranks are the devices the plan uses, each TP group consecutive.
    std::printf("\nwrote %s (run it: mpirun -np %d plait train --config %s)\n", o.out.c_str(), chosen.devices_used(),
                o.out.c_str());
  }
}

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "plan",
      "Plan a heterogeneous cluster: stage groups, layers, micro-batch size and per-device shares,\n"
      "schedule, chunks and sequence segments within every device's memory; prints the chosen plan\n"
      "and the runner-ups and writes a plan file for plait train. See docs/planner.md.");
  auto o = std::make_shared<PlanOptions>();
  cmd->add_option("--cluster", o->cluster,
                  "Cluster spec (JSON): device types (profile or tflops, memory_gib, slowdown),\n"
                  "machines, links; see docs/planner.md and share/clusters/")
      ->type_name("FILE");
  cmd->add_option("--model", o->model,
                  "Model preset (" + spec::model_preset_names() + ")\nor a JSON config whose \"model\" section is used")
      ->type_name("PRESET|FILE");
  cmd->add_option("--profile-model", o->profile_model,
                  "The measured model whose tables the cluster's zorse: profiles read (overrides the\n"
                  "cluster spec's \"profile_model\"; default: the preset's table, or the one of the\n"
                  "model's family and hidden size; a model without one is an error, never a substitute)")
      ->type_name("NAME");
  cmd->add_option("--global-batch", o->global_batch, "Sequences per optimizer step (the global batch B)")
      ->type_name("INT");
  cmd->add_option("--seq", o->seq, "Tokens per sequence S")->type_name("INT");
  cmd->add_option("--config", o->config,
                  "Base config whose \"train\" fields (lr, steps, ...) and other sections (\"data\",\n"
                  "\"checkpoint\", ...) the plan file takes over (seq, microbatch_size, microbatches and\n"
                  "segments are the plan's; its \"model\" and \"parallel\" are not taken)")
      ->type_name("FILE");
  cmd->add_option("--out", o->out, "Write the chosen plan as a config file (plait train --config FILE)")
      ->type_name("FILE");
  cmd->add_option("--top", o->top, "Plans to print (the chosen one and the runner-ups)")->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--devices-of-type", o->devices_of_type,
                  "Use only these device types (comma-separated type names of the cluster spec),\n"
                  "e.g. to plan a homogeneous sub-cluster")
      ->type_name("TYPES");
  cmd->add_option("--schedule", o->schedule,
                  "Consider only these schedule families (comma-separated): " +
                      schedule::schedule_family_names() + ";\ndefault all")
      ->type_name("NAMES");
  cmd->add_flag("--no-segments", o->no_segments,
                "Schedule whole micro-batches only (no sequence segments, k = 1)");
  cmd->add_option("--min-unit-tokens", o->min_unit_tokens,
                  "Segment sequences only where each unit (micro-batch size x shortest segment) has at least this "
                  "many tokens; 0: no limit (default: the shortest sequence the devices' measured profiles cover)");
  cmd->add_flag("--no-shard", o->no_shard,
                "Keep the precision's default sharding (mixed16: optimizer state over each stage's group; fp32: "
                "none) instead of choosing a level or offload per stage");
  cmd->add_flag("--no-recompute", o->no_recompute,
                "Never plan activation recomputation (by default a stage recomputes the fewest layers that make\n"
                "it fit, when it does not fit otherwise)");
  cmd->add_option("--tp", o->tp,
                  "Tensor-parallel degrees a stage may use (comma-separated, of 1, 2, 4, 8; default all on a\n"
                  "real cluster, 1 on an emulated one): a stage's ranks become TP groups of t devices of one\n"
                  "type in one machine (t dividing its devices of that type). plait train runs the plan,\n"
                  "whether its stages share one degree or not")
      ->type_name("INTS");
  cmd->add_flag("--even", o->even,
                "Baseline: plan as if every device had the median device's speed, with stages of equal\n"
                "width (pp x dp; even layers and micro-batch shares; memory still respected); the\n"
                "predictions printed are then on the real devices");
  cmd->add_option("--microbatch-size", o->microbatch_size,
                  "Micro-batch sizes to try (comma-separated); default 1, 2, 4, ..., 64 dividing B")
      ->type_name("INTS");
  cmd->add_option("--max-stages", o->max_stages, "Pipeline stages at most")->type_name("INT")->capture_default_str();
  cmd->add_option("--simulate", o->simulate, "Estimated plans re-ranked by simulation")->type_name("INT")
      ->capture_default_str();
  cmd->add_flag("--verbose", o->verbose,
                "Also list every simulated layout with its analytic estimate");
  cmd->add_option("--documents", o->documents,
                  "Plan for packed documents (data.packing \"documents\") of these lengths:\n"
                  "lognormal:MEDIAN:SIGMA[:SEED], or histogram:PATH, the <name>.lengths.json plait data prepare\n"
                  "writes beside the shards (or its directory). Each of --document-steps steps is drawn, packed\n"
                  "and read in the order --config's data.balance gives (plain, or wlb and its window); plans are\n"
                  "made for the worst micro-batch: memory for the longest segments a flops split cuts from any\n"
                  "micro-batch's documents, the step time of the slowest step; the report says what that cost\n"
                  "against equal work. The plan file then packs documents and cuts per micro-batch")
      ->type_name("DIST");
  cmd->add_option("--document-steps", o->document_steps, "With --documents: steps drawn")
      ->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--evaluate", o->evaluate,
                  "Predict an existing plan file (a config with a parallel section) on --cluster;\n"
                  "rank r runs on the cluster's device r")
      ->type_name("FILE");
  cmd->add_option("--flops-profile", o->flops_profile,
                  "Write a provisional device profile (Zorse's latency format) for --model at --seq\n"
                  "from FLOPs at --gflops, and exit (until plait profile has measured the device)")
      ->type_name("FILE");
  cmd->add_option("--gflops", o->gflops, "Sustained GFLOP/s for --flops-profile")->type_name("NUMBER");
  cmd->add_option("--device-name", o->device_name, "Device type name in the --flops-profile file")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "dtype key in the --flops-profile file")->capture_default_str();
  cmd->add_option("--max-microbatch", o->max_microbatch, "Micro-batch sizes 1..N in the --flops-profile file")
      ->type_name("INT")
      ->capture_default_str();
  add_search_flags(cmd, o->search);
  cmd->callback([o] { run_plan(*o); });
}

const CommandRegistration kRegistration(35, register_plan);

}  // namespace
}  // namespace plait::cli
