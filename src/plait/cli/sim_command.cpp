// `plait sim`: simulate one schedule, or every schedule side by side (--compare), for a model,
// pipeline shape, sequence split and device profile; print step time, bubble and memory per
// rank; write Chrome-trace and HTML timelines on request. docs/simulator.md describes it all.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>

#include "plait/cli/commands.h"
#include "plait/cli/document_simulation.h"
#include "plait/cli/flag_values.h"
#include "plait/cli/output_path.h"
#include "plait/cli/parallel_flags.h"
#include "plait/cli/search_flags.h"
#include "plait/core/error.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"
#include "plait/schedule/validator.h"
#include "plait/spec/model_presets.h"
#include "plait/sim/report_text.h"
#include "plait/sim/schedule_comparison.h"
#include "plait/sim/simulation.h"
#include "plait/trace/chrome_trace.h"
#include "plait/trace/html_timeline.h"

namespace plait::cli {

namespace {

struct SimOptions {
  std::string model = "gpt-7b";
  std::string pp = "8", chunks = "2", microbatches = "8", microbatch_size = "1", segments = "4";
  std::string split = "flops";
  std::string seq = "32768";
  std::string schedule = "seq1f1b";
  std::string device = "a100-80gb";
  std::string profile_model;
  std::string recompute = "none";
  std::string tp = "1";
  bool compare = false;
  bool overlap_pairs = false;
  std::string trace, html;
  std::string documents;
  std::string balance_window = "1", document_steps = "16", dp = "1";
  SearchFlags search;
};

// Refuses a simulation whose estimate (sim::simulation_memory_bytes) exceeds the memory there is.
void check_memory(const SimOptions& o, const sim::SimulationConfig& config, double bytes, const std::string& units) {
  char each[64];
  std::snprintf(each, sizeof each, " at ~%.0f bytes each", config.record_events ? sim::kSimulationBytesPerUnitWithEvents
                                                                                : sim::kSimulationBytesPerUnit);
  check_memory_estimate(o.search, bytes, "this simulation", units + each + ", docs/simulator.md",
                        "simulate fewer --microbatches (the step time and bubble per micro-batch settle within a "
                        "few times --pp)" + std::string(config.record_events ? ", or without --trace/--html" : ""));
}

std::string units_text(const schedule::PipelineShape& s) {
  const double units = static_cast<double>(s.stages) * s.chunks * s.microbatches * s.segments;
  char text[160];
  std::snprintf(text, sizeof text, "%.0f units: %d ranks x %d chunk(s) x %d micro-batches x %d segment(s)", units,
                s.stages, s.chunks, s.microbatches, s.segments);
  return text;
}

void write_timelines(const sim::SimulationConfig& config, const sim::SimulationReport& report,
                     const std::string& trace_path, const std::string& html_path) {
  if (trace_path.empty() && html_path.empty()) return;
  const trace::Timeline timeline = sim::make_timeline(config, report);
  if (!trace_path.empty()) {
    trace::write_chrome_trace_file(timeline, trace_path);
    std::printf("wrote %s (Chrome trace events; open in https://ui.perfetto.dev)\n", trace_path.c_str());
  }
  if (!html_path.empty()) {
    trace::write_html_timeline_file(timeline, html_path);
    std::printf("wrote %s (HTML timeline)\n", html_path.c_str());
  }
}

// --segments: a count k, or the lengths themselves ("11040,8416,7080,6232", summing to --seq;
// --seq defaults to their sum).
int read_segments(const CLI::App& cmd, const SimOptions& o, std::int64_t& seq, std::vector<std::int64_t>& lengths) {
  if (o.segments.find(',') == std::string::npos) {
    return static_cast<int>(positive_flag("--segments", o.segments, 1 << 16));
  }
  std::int64_t sum = 0;
  for (const std::string& item : comma_list(o.segments)) {
    lengths.push_back(positive_flag("--segments", item, std::int64_t{1} << 32));
    sum += lengths.back();
  }
  if (!cmd.count("--seq")) seq = sum;
  if (sum != seq) {
    throw Error("--segments: the lengths sum to " + std::to_string(sum) + " tokens, but --seq is " +
                std::to_string(seq));
  }
  return static_cast<int>(lengths.size());
}

// --split even | flops | flops:<multiple> (lengths rounded to that multiple, the Seq1F1B
// reference's rounding to the tensor-parallel size).
void read_split(const std::string& text, sim::SimulationConfig& config) {
  const std::size_t colon = text.find(':');
  config.split = spec::parse_split_method(text.substr(0, colon));
  if (colon == std::string::npos) return;
  if (config.split != spec::SplitMethod::flops) {
    throw Error("--split: only flops takes a rounding multiple (flops:<multiple>), found '" + text + "'");
  }
  config.split_multiple = positive_flag("--split", text.substr(colon + 1), 1 << 20);
}

// --tp t (every stage) or t0,t1,... (one per pipeline rank): each rank is a TP group of t devices
// (spec/tensor_parallel_plan.h). A flops split then rounds its lengths to multiples of the
// degrees (sequence parallelism splits every unit's tokens over the group), unless --split
// gives its own multiple (which must then be one of them).
void read_tensor_parallel(const SimOptions& o, sim::SimulationConfig& config) {
  std::int64_t multiple = 1;
  for (const std::string& item : comma_list(o.tp)) {
    const int t = static_cast<int>(positive_flag("--tp", item, 1 << 10));
    config.tensor_parallel.push_back(t);
    multiple = std::lcm(multiple, std::int64_t{t});
  }
  if (multiple == 1) {
    config.tensor_parallel.clear();
    return;
  }
  if (config.split == spec::SplitMethod::flops && o.split.find(':') == std::string::npos) {
    config.split_multiple = multiple;
  }
}

void run_sim(const CLI::App& cmd, const SimOptions& o) {
  if (!o.trace.empty()) prepare_output_path("--trace", o.trace);
  if (!o.html.empty()) prepare_output_path("--html", o.html);
  sim::SimulationConfig config;
  config.seq = positive_flag("--seq", o.seq, std::int64_t{1} << 32);
  std::vector<std::int64_t> lengths;
  const int segments = read_segments(cmd, o, config.seq, lengths);
  config.model = spec::resolve_model(o.model, config.seq);
  if (!lengths.empty()) config.partition = spec::partition_from_lengths(config.model.model, lengths);
  config.microbatch_size = static_cast<int>(positive_flag("--microbatch-size", o.microbatch_size, 1 << 20));
  read_split(o.split, config);
  config.shape.stages = static_cast<int>(positive_flag("--pp", o.pp, 1 << 16));
  config.shape.microbatches = static_cast<int>(positive_flag("--microbatches", o.microbatches, 1 << 24));
  const int chunks = static_cast<int>(positive_flag("--chunks", o.chunks, 64));
  config.devices = sim::resolve_devices(
      o.device, config.model.model,
      {o.profile_model.empty() ? config.model.profile_model : o.profile_model, config.seq});
  config.record_events = !o.trace.empty() || !o.html.empty();
  config.overlap_pairs = o.overlap_pairs;
  config.memory.recompute = parse_recompute_flag("--recompute", o.recompute);
  read_tensor_parallel(o, config);
  ProgressLine progress(parse_progress_flag(o.search.progress));
  config.progress = progress.callback();
  // Replicas of one pipeline differ only in the documents they read: without --documents every
  // replica's step is the same simulation.
  if (cmd.count("--dp") && o.documents.empty()) {
    throw Error("--dp: data-parallel replicas are simulated only with --documents (without them every replica "
                "runs the same pipeline)");
  }

  if (o.compare) {
    check_memory(o, config, sim::comparison_memory_bytes(config, chunks, segments),
                 "every schedule's report is kept: the sum over the schedules of " + units_text(config.shape) +
                     " for the micro-batch-level ones, more for interleaved and segmented ones");
    const auto rows = sim::compare_schedules(config, chunks, segments);
    progress.finish();
    std::fputs(sim::format_comparison(config, rows).c_str(), stdout);
    for (const auto& row : rows) {
      if (!row.report) continue;
      sim::SimulationConfig row_config = config;
      row_config.shape = row.shape;
      write_timelines(row_config, *row.report,
                      o.trace.empty() ? "" : sim::path_with_schedule(o.trace, row.family),
                      o.html.empty() ? "" : sim::path_with_schedule(o.html, row.family));
    }
    return;
  }

  sim::SimulationReport report;
  std::string title;
  if (const schedule::ScheduleFamily* family = schedule::find_schedule_family(o.schedule)) {
    // Flags left at their defaults adapt to the family (k = 1 for micro-batch schedules, the
    // family's fixed v); flags given explicitly must fit it.
    config.shape.segments = cmd.count("--segments") || family->sequence_level ? segments : 1;
    config.shape.chunks = cmd.count("--chunks") || family->fixed_chunks == 0
                              ? chunks
                              : family->fixed_chunks;
    check_memory(o, config, sim::simulation_memory_bytes(config.shape, config.record_events), units_text(config.shape));
    if (!o.documents.empty()) {
      DocumentSimulation documents;
      documents.distribution = data::parse_document_distribution(o.documents, "--documents");
      documents.window_steps = static_cast<int>(positive_flag("--balance-window", o.balance_window, 1 << 16));
      documents.steps = static_cast<int>(positive_flag("--document-steps", o.document_steps, 1 << 16));
      documents.replicas = static_cast<int>(positive_flag("--dp", o.dp, 1 << 12));
      const std::string text = simulate_documents(config, *family, documents);
      progress.finish();
      std::fputs(text.c_str(), stdout);
      return;
    }
    report = sim::simulate_family(config, *family);
    title = family->name + ": " + family->title + " (" + family->source + ")";
  } else if (std::filesystem::is_regular_file(o.schedule)) {
    schedule::Schedule s = schedule::read_schedule_file(o.schedule);
    const schedule::Layout& layout = s.layout;
    auto agree = [&](const char* flag, int given, int found) {
      if (cmd.count(flag) && given != found) {
        throw Error(o.schedule + ": the schedule has " + std::to_string(found) + " for " + flag +
                    " but " + flag + " " + std::to_string(given) + " was given");
      }
    };
    agree("--pp", config.shape.stages, layout.num_ranks());
    agree("--microbatches", config.shape.microbatches, layout.num_microbatches);
    agree("--segments", segments, layout.num_segments);
    agree("--chunks", chunks, layout.max_chunks());
    config.shape = {layout.num_ranks(), layout.max_chunks(), layout.num_microbatches, layout.num_segments};
    check_memory(o, config, sim::simulation_memory_bytes(config.shape, config.record_events), units_text(config.shape));
    try {
      report = sim::simulate_schedule(config, std::move(s), o.schedule);
    } catch (const schedule::ScheduleViolationError& e) {
      // The grid below the one-line summary shows where the schedule breaks.
      const std::string& grid = e.grid();
      std::fputs(grid.substr(grid.find('\n') + 1).c_str(), stderr);
      throw;
    }
    title = o.schedule + " (schedule text)";
  } else {
    throw Error("--schedule: '" + o.schedule + "' is neither a schedule (" +
                schedule::schedule_family_names() + ") nor a schedule text file");
  }
  progress.finish();
  std::fputs(sim::format_report(config, report, title).c_str(), stdout);
  write_timelines(config, report, o.trace, o.html);
}

void register_sim(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sim",
      "Simulate a pipeline schedule (or --compare all of them): step time, bubble, memory per\n"
      "rank, and timelines. Costs come from FLOPs and a device profile; see docs/simulator.md.");
  auto o = std::make_shared<SimOptions>();
  cmd->add_option("--model", o->model,
                  "Model preset or JSON config whose \"model\" section describes it (family gpt2 or\n"
                  "llama, layers, hidden, heads, ...; docs/config.md). Presets (family layers/hidden/\n"
                  "heads; the result prints each preset's source, docs/simulator.md lists them):\n" +
                      spec::model_preset_lines() + "\nPresets size max_seq to --seq.")
      ->capture_default_str();
  cmd->add_option("--pp", o->pp, "Pipeline ranks p")->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--chunks", o->chunks,
                  "Model chunks per rank v for interleaved and seq1f1b-i (zb-v always uses 2,\n"
                  "the others 1)")
      ->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--microbatches", o->microbatches, "Micro-batches per step m")->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--microbatch-size", o->microbatch_size, "Sequences per micro-batch b")
      ->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--segments", o->segments,
                  "Sequence segments k for seq1f1b, seq1f1b-i and seq-zb (the others schedule\n"
                  "whole micro-batches, k = 1), or their lengths: 11040,8416,7080,6232 (summing\n"
                  "to --seq, which defaults to their sum; --split is then not used)")
      ->type_name("INT|LENGTHS")
      ->capture_default_str();
  cmd->add_option("--split", o->split,
                  "Segment lengths: even, or flops (equal forward FLOPs per segment, Seq1F1B's\n"
                  "computation-wise partition); flops:<multiple> rounds the lengths to that\n"
                  "multiple (the Seq1F1B reference rounds to the tensor-parallel size, e.g. 8)")
      ->capture_default_str();
  cmd->add_option("--seq", o->seq, "Sequence length in tokens")->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--recompute", o->recompute,
                  "Activation recomputation: none, full, N (the first N layers of every virtual stage)\n"
                  "or n0,n1,... (one count per virtual stage), as parallel.recompute")
      ->type_name("WHAT")
      ->capture_default_str();
  cmd->add_option("--tp", o->tp,
                  "Tensor-parallel degree t of every pipeline rank, or t0,t1,... one per rank: each\n"
                  "rank is then a TP group of t devices of one machine (Megatron tensor + sequence\n"
                  "parallelism, spec/tensor_parallel_plan.h): each device does 1/t of the work (timed\n"
                  "on the device curve at that work) plus per layer 2 all-gathers and 2 reduce-\n"
                  "scatters in F and in B and 2 all-gathers in W, rings over the device's machine\n"
                  "link; memory is one device's. heads, kv_heads and ffn must divide by t; a flops\n"
                  "split rounds segment lengths to multiples of t. Simulator and planner only: plait\n"
                  "train refuses parallel.tp > 1 for now")
      ->type_name("T|LIST")
      ->capture_default_str();
  cmd->add_option("--schedule", o->schedule,
                  "Schedule: " + schedule::schedule_family_names() +
                      ",\nor a schedule text file (one line of actions per rank, e.g.\n"
                      "'F0.0 F1.0 BW0.0 BW1.0'; docs/schedules.md)")
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "Device profile: a100-80gb (default: the A100 datasheet's 312 TFLOP/s peak x the\n"
                  "efficiency Zorse measured per layer on A100 80GB, rising with the work; 80 GiB),\n"
                  "zorse:<gpu>[:<dtype>]\n"
                  "(per-layer latencies measured by Zorse, share/profiles/zorse), or a JSON file;\n"
                  "a comma-separated list gives one profile per rank")
      ->capture_default_str();
  cmd->add_option("--profile-model", o->profile_model,
                  "The measured model whose Zorse tables zorse: profiles read (default: the\n"
                  "preset's, or the one of the model's family and hidden size; none is never\n"
                  "substituted silently), e.g. deepspeedllama_7b");
  cmd->add_flag("--compare", o->compare,
                "Simulate every schedule and print a table (step time, bubble, throughput relative\n"
                "to 1f1b, peak memory per rank); skips those whose constraints fail, with the reason");
  cmd->add_flag("--overlap-pairs", o->overlap_pairs,
                "Model DualPipe's overlap of a forward with the next backward of another chunk\n"
                "(dualpipe-v's pairs; any such pair of a --schedule file): the best case, UNVALIDATED\n"
                "until a GPU backend runs it. CPU ranks run the pair in order (the default)");
  cmd->add_option("--trace", o->trace,
                  "Write a Chrome trace event JSON file (Perfetto); with --compare one file per\n"
                  "schedule, named <file stem>.<schedule>.<extension>")
      ->type_name("FILE");
  cmd->add_option("--html", o->html,
                  "Write a self-contained HTML timeline; with --compare one per schedule, named\n"
                  "like --trace")
      ->type_name("FILE");
  cmd->add_option("--documents", o->documents,
                  "Packed documents of lengths from a named distribution, lognormal:MEDIAN:SIGMA[:SEED]\n"
                  "(tokens; seed 1 by default), or a corpus's own, histogram:PATH (the <name>.lengths.json\n"
                  "plait data prepare writes beside the shards, or its directory): time --document-steps steps with each micro-batch's\n"
                  "units from its own documents (a flops split cut per micro-batch), in plain order,\n"
                  "balanced (data.balance wlb, windows of --balance-window steps) and with equal work,\n"
                  "and print the imbalance bubble of each (docs/simulator.md, \"Packed documents\")")
      ->type_name("DIST");
  cmd->add_option("--balance-window", o->balance_window, "With --documents: data.balance_window, in steps")
      ->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--document-steps", o->document_steps, "With --documents: steps to average over")
      ->type_name("INT")
      ->capture_default_str();
  cmd->add_option("--dp", o->dp,
                  "With --documents: data-parallel replicas, each running --microbatches of the step's\n"
                  "micro-batches; the step waits for the slowest replica")
      ->type_name("INT")
      ->capture_default_str();
  add_search_flags(cmd, o->search);
  cmd->callback([cmd, o] { run_sim(*cmd, *o); });
}

const CommandRegistration kRegistration(30, register_sim);

}  // namespace
}  // namespace plait::cli
