#include "plait/cli/document_simulation.h"

#include <algorithm>
#include <cstdio>

#include "plait/data/balanced_order.h"
#include "plait/data/packed_sequences.h"
#include "plait/sim/document_work.h"
#include "plait/spec/precision_policy.h"

namespace plait::cli {

std::string simulate_documents(const sim::SimulationConfig& config, const schedule::ScheduleFamily& family,
                               const DocumentSimulation& documents) {
  const int m = config.shape.microbatches, b = config.microbatch_size, seq = static_cast<int>(config.seq);
  const int replicas = documents.replicas;
  spec::SegmentRequest request;
  request.count = config.shape.segments;
  request.split = config.split;
  request.multiple = config.split_multiple;
  const spec::SequencePartition nominal =
      config.partition.count() > 0 ? config.partition : spec::cut_sequence(config.model.model, config.seq, request);
  const bool cuts = documents.cuts && config.split == spec::SplitMethod::flops && nominal.count() > 1 &&
                    config.partition.count() == 0;
  // The loader reads every replica's micro-batches of a step (JobConfig::global_microbatches).
  const sim::DocumentStream plain(documents.distribution, seq, b, replicas * m, documents.steps, 0);
  const sim::DocumentStream balanced(documents.distribution, seq, b, replicas * m, documents.steps,
                                     documents.window_steps);
  const data::PackedSequences& packed = plain.packed();
  const sim::DocumentCuts cut{nominal, cuts, config.split_multiple};
  struct Row {
    std::string name;
    double ratio = 0, seconds = 0, replica_ratio = 0;
  };
  std::vector<Row> rows = {{"equal work"}, {"plain order"}, {"wlb, window " + std::to_string(documents.window_steps)}};
  std::int64_t longest = 0;
  auto time = [&](const sim::MicrobatchWork& units) {
    sim::SimulationConfig c = config;
    c.record_events = false;
    c.progress = nullptr;
    c.microbatch_work = units;
    return sim::simulate_family(c, family).result.step_time;
  };
  // One step of an order: its slowest replica, and max/mean of sum(doc^2) over the replicas.
  auto add = [&](Row& row, const sim::StepDocuments& step) {
    const sim::ReplicaSteps r = sim::replica_steps(step, replicas, time);
    row.ratio += step.max_over_mean / documents.steps;
    row.seconds += r.slowest / documents.steps;
    row.replica_ratio += data::max_over_mean(r.attention, 1) / documents.steps;
  };
  for (int s = 0; s < documents.steps; ++s) {
    const sim::StepDocuments p = sim::step_documents(config.model.model, plain.loader(), s, cut);
    const sim::StepDocuments w = sim::step_documents(config.model.model, balanced.loader(), s, cut);
    for (const auto* x : {&p, &w}) longest = std::max(longest, *std::max_element(x->longest.begin(), x->longest.end()));
    // Equal work: every micro-batch of every replica carrying the step's mean.
    sim::StepDocuments equal = p;
    equal.units = sim::equal_work(p.units);
    equal.attention.assign(p.attention.size(), 1.0);
    equal.max_over_mean = 1;
    add(rows[0], equal);
    add(rows[1], p);
    add(rows[2], w);
  }
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "packed documents: %s, %lld documents in %lld sequences of %d (%.1f%% padding); %d steps of %d x %d%s\n",
                documents.distribution.text().c_str(), static_cast<long long>(packed.document_count()),
                static_cast<long long>(packed.size()), seq,
                100.0 * static_cast<double>(packed.padding_tokens()) / (static_cast<double>(packed.size()) * seq),
                documents.steps, m, b,
                replicas > 1 ? (" on each of " + std::to_string(replicas) +
                                " data-parallel replicas (the step: the slowest replica's pipeline)")
                                   .c_str()
                             : "");
  out += line;
  std::snprintf(line, sizeof line, "  %-16s %22s %14s %14s%s\n", "order", "max/mean sum(doc^2)", "step (mean)",
                "bubble", replicas > 1 ? "   max/mean per replica" : "");
  out += line;
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "  %-16s %22.3f %12.4g s %+13.1f%%", r.name.c_str(), r.ratio, r.seconds,
                  100.0 * (r.seconds / rows[0].seconds - 1));
    out += line;
    if (replicas > 1) {
      std::snprintf(line, sizeof line, " %23.3f", r.replica_ratio);
      out += line;
    }
    out += "\n";
  }
  const double element = static_cast<double>(spec::bytes_of(spec::TensorClass::stage_message, config.memory.precision));
  std::snprintf(line, sizeof line,
                "  segments: %s; longest segment %lld tokens (nominal %lld): stage messages up to %.3g MB, "
                "the worst micro-batch's\n",
                cuts ? "cut per micro-batch from its documents (flops split)" : "the nominal cut",
                static_cast<long long>(longest),
                static_cast<long long>(*std::max_element(nominal.lengths.begin(), nominal.lengths.end())),
                static_cast<double>(longest) * b * config.model.model.hidden * element / 1e6);
  out += line;
  return out;
}

}  // namespace plait::cli
