// `plait profile`: measures this machine's per-layer forward/backward times for a config's model
// (one thread by default, as each rank runs when ranks share the machine) and writes them as a
// device profile in Zorse's model_latencies.json shape, plus the per-segment F/B/W times of the
// config's sequence partition (runtime/profile_json.h; docs/runtime.md, "Profiles").
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "plait/cli/commands.h"
#include "plait/cli/parallel_flags.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/profile_json.h"
#include "plait/runtime/unit_profiler.h"
#include "plait/sim/latency_table.h"

namespace plait::cli {
namespace {

struct ProfileArgs {
  std::string config;
  std::string out = "profile.json";
  std::string segments_out;
  std::string seqs;
  std::string device = "host";
  int max_batch = 8;
  int repeats = 5;
  int threads = 1;
  int probe_layers = 2;
  int in_flight = 2;
  double slowdown = 1;
  bool defer_weight = false;
  bool merge = false;
  std::string precision;  // empty: the config's train.precision
  ParallelFlags layout;
};

std::vector<int> parse_seqs(const std::string& text, int max_seq) {
  std::vector<int> seqs;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int v = 0;
    try {
      std::size_t pos = 0;
      v = std::stoi(item, &pos);
      if (pos != item.size()) v = 0;
    } catch (...) {
      v = 0;
    }
    if (v < 1 || v > max_seq) {
      throw Error("--seq: expected sequence lengths in [1, model.max_seq " + std::to_string(max_seq) +
                  "], found '" + item + "'");
    }
    seqs.push_back(v);
  }
  return seqs;
}

void run_profile(const ProfileArgs& a) {
  runtime::JobConfig job = a.config.empty() ? runtime::job_from_run_config(runtime::default_run_config())
                                            : runtime::load_job_config(a.config);
  apply_parallel_flags(a.layout, job);
  omp_set_num_threads(a.threads);
  const spec::ModelSpec& m = job.run.model;
  const runtime::TrainConfig t = job.global_train();
  const std::vector<int> seqs = a.seqs.empty() ? std::vector<int>{t.seq} : parse_seqs(a.seqs, m.max_seq);
  runtime::ProfileOptions options;
  options.repeats = a.repeats;
  options.probe_layers = a.probe_layers;
  options.in_flight = a.in_flight;
  options.slowdown = a.slowdown;
  options.defer_weight = a.defer_weight;
  // A config that recomputes also gets its layers' rebuild timed (recompute_ms).
  options.recompute = job.parallel.recompute.any();
  options.precision = t.precision;
  if (a.precision == "bf16") options.precision = spec::Precision::bf16;
  if (a.precision == "fp32") options.precision = spec::Precision::fp32;
  const std::string dtype = runtime::latency_dtype(options.precision);
  const std::string name = runtime::profile_model_name(m);
  std::printf("plait profile: %s (%s), %s, %d thread(s), median of %d runs\n", name.c_str(),
              spec::describe(m).c_str(), std::string(spec::precision_name(options.precision)).c_str(), a.threads,
              a.repeats);
  // --merge reads the table first, so a malformed one stops the run before the measuring.
  nlohmann::json table = nlohmann::json::object();
  if (a.merge && std::filesystem::exists(a.out)) table = read_json_file(a.out);

  std::vector<sim::LatencyEntry> entries;
  for (int seq : seqs) {
    const runtime::BatchProfile p = runtime::profile_batches(m, seq, a.max_batch, options);
    std::printf("  seq %d, ms per micro-batch of 1..%d sequences:\n", seq, a.max_batch);
    const auto print_row = [&](const char* what, const std::vector<runtime::UnitTimes>& times) {
      std::printf("    %-16s F", what);
      for (const auto& u : times) std::printf(" %8.3f", u.forward * 1e3);
      std::printf("\n    %-16s B+W", "");
      for (const auto& u : times) std::printf(" %8.3f", u.backward() * 1e3);
      std::printf("\n");
    };
    print_row("layer", p.layer);
    print_row("embedding", p.embedding);
    print_row("head", p.head);
    for (sim::LatencyEntry& e : runtime::latency_entries(p, name, a.device, options.precision)) {
      entries.push_back(std::move(e));
    }
  }
  // Merging keeps every entry of the table that this run did not measure (other models, devices,
  // sequence lengths and dtypes: an fp32 and a bf16 profile of one machine in one file).
  table.merge_patch(sim::latency_table_json(entries));
  write_json_file(a.out, table, 1);
  std::printf("%s %s (per-layer latencies in Zorse's model_latencies.json shape: %s -> %s -> seq -> "
              "%s; embedding and head under %s+embedding and %s+head)\n",
              a.merge ? "merged into" : "wrote", a.out.c_str(), name.c_str(), a.device.c_str(), dtype.c_str(),
              dtype.c_str(), dtype.c_str());

  const runtime::SegmentProfile sp =
      runtime::profile_segments(m, t.microbatch_size, job.run.partition(), options);
  std::printf("  segments of the config (micro-batch %d), ms for F / B / W:\n", t.microbatch_size);
  for (int j = 0; j < sp.partition.count(); ++j) {
    const spec::Segment s = sp.partition.segment(j);
    std::printf("    [%5d, %5d)  layer %7.3f / %7.3f / %7.3f   embedding %7.3f / %7.3f / %7.3f   head "
                "%7.3f / %7.3f / %7.3f\n",
                s.start, s.end(), sp.layer[j].forward * 1e3, sp.layer[j].backward_input * 1e3,
                sp.layer[j].backward_weight * 1e3, sp.embedding[j].forward * 1e3,
                sp.embedding[j].backward_input * 1e3, sp.embedding[j].backward_weight * 1e3,
                sp.head[j].forward * 1e3, sp.head[j].backward_input * 1e3,
                sp.head[j].backward_weight * 1e3);
  }
  std::string segments_out = a.segments_out;
  if (segments_out.empty()) {
    std::filesystem::path p(a.out);
    segments_out = (p.parent_path() / (p.stem().string() + ".segments.json")).string();
  }
  write_json_file(segments_out, runtime::to_json(sp, a.threads), 1);
  std::printf("wrote %s (per-segment F/B/W of one layer, the embedding and the head)\n",
              segments_out.c_str());
}

void register_profile(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "profile",
      "Measure this machine's per-layer forward/backward times for a config's model and write a\n"
      "device profile in Zorse's model_latencies.json shape (what a cluster spec's\n"
      "device_types.<t>.profile names for plait plan), plus per-segment F/B/W times of the config's\n"
      "sequence partition (docs/runtime.md).");
  auto a = std::make_shared<ProfileArgs>();
  cmd->add_option("--config", a->config, "Config file (model, train; default: the built-in default)")
      ->type_name("FILE");
  cmd->add_option("--out", a->out, "Latency table to write")->type_name("FILE")->capture_default_str();
  cmd->add_option("--segments-out", a->segments_out,
                  "Per-segment profile to write (default: <out stem>.segments.json)")
      ->type_name("FILE");
  cmd->add_option("--seq", a->seqs,
                  "Comma-separated sequence lengths to measure whole sequences at (default:\n"
                  "train.seq)");
  cmd->add_option("--max-batch", a->max_batch, "Micro-batch sizes 1..N for the latency fit")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--device", a->device, "Device type name the table files the times under")
      ->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Runs per measurement (the median is kept)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads,
                  "OpenMP/OpenBLAS threads (1: as each rank runs when ranks share the cores)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--probe-layers", a->probe_layers,
                  "Layers of the stage a layer's time is measured in (divided by this); use the\n"
                  "layers per stage of the run to predict, so weights and activations occupy the\n"
                  "caches as they will")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--in-flight", a->in_flight,
                  "Micro-batches held at once while measuring (forwards of micro-batch r before the\n"
                  "backwards of r - N + 1, as a pipeline stage holds them; 1: each backward right\n"
                  "after its forward); use the run's in-flight count, so the caches are as cold")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--slowdown", a->slowdown,
                  "Idle (S - 1) times each unit's duration after it, as a rank emulating a device S times\n"
                  "slower does (parallel.devices[].slowdown), so each unit starts as cold as it will there;\n"
                  "the times written are the unpadded ones")
      ->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  cmd->add_flag("--defer-weight", a->defer_weight,
                "Run each micro-batch's W after the next micro-batch's F and B, as zero-bubble\n"
                "schedules (zb-h1, zb-v, seq-zb) do, instead of right after its own B");
  cmd->add_option("--precision", a->precision,
                  "Engine precision to measure in: fp32, or bf16 mixed precision (filed under dtype\n"
                  "\"float16\", which a cluster spec of precision \"mixed16\" reads; default: the\n"
                  "config's train.precision)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->add_flag("--merge", a->merge,
                "Add this run's entries to the table in --out (replacing the same model, device,\n"
                "sequence length and dtype) instead of overwriting the file");
  add_parallel_flags(cmd, a->layout);
  // `plait profile links` is a subcommand of its own (profile_links_command.cpp).
  cmd->callback([a, cmd] {
    if (cmd->get_subcommands().empty()) run_profile(*a);
  });
}

const CommandRegistration kRegistration(25, register_profile);

}  // namespace
}  // namespace plait::cli
