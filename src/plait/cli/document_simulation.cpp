#include "plait/cli/document_simulation.h"

#include <algorithm>
#include <cstdio>

#include "plait/data/packed_sequences.h"
#include "plait/sim/document_work.h"
#include "plait/spec/precision_policy.h"

namespace plait::cli {

std::string simulate_documents(const sim::SimulationConfig& config, const schedule::ScheduleFamily& family,
                               const DocumentSimulation& documents) {
  const int m = config.shape.microbatches, b = config.microbatch_size, seq = static_cast<int>(config.seq);
  spec::SegmentRequest request;
  request.count = config.shape.segments;
  request.split = config.split;
  request.multiple = config.split_multiple;
  const spec::SequencePartition nominal =
      config.partition.count() > 0 ? config.partition : spec::cut_sequence(config.model.model, config.seq, request);
  const bool cuts = documents.cuts && config.split == spec::SplitMethod::flops && nominal.count() > 1 &&
                    config.partition.count() == 0;
  const sim::DocumentStream plain(documents.distribution, seq, b, m, documents.steps, 0);
  const sim::DocumentStream balanced(documents.distribution, seq, b, m, documents.steps, documents.window_steps);
  const data::PackedSequences& packed = plain.packed();
  const sim::DocumentCuts cut{nominal, cuts, config.split_multiple};
  struct Row {
    std::string name;
    double ratio = 0, seconds = 0;
  };
  std::vector<Row> rows = {{"equal work"}, {"plain order"}, {"wlb, window " + std::to_string(documents.window_steps)}};
  std::int64_t longest = 0;
  auto time = [&](sim::MicrobatchWork units) {
    sim::SimulationConfig c = config;
    c.record_events = false;
    c.progress = nullptr;
    c.microbatch_work = std::move(units);
    return sim::simulate_family(c, family).result.step_time;
  };
  for (int s = 0; s < documents.steps; ++s) {
    const sim::StepDocuments p = sim::step_documents(config.model.model, plain.loader(), s, cut);
    const sim::StepDocuments w = sim::step_documents(config.model.model, balanced.loader(), s, cut);
    for (const auto* x : {&p, &w}) longest = std::max(longest, *std::max_element(x->longest.begin(), x->longest.end()));
    rows[0].ratio += 1.0 / documents.steps;
    rows[0].seconds += time(sim::equal_work(p.units)) / documents.steps;
    rows[1].ratio += p.max_over_mean / documents.steps;
    rows[1].seconds += time(p.units) / documents.steps;
    rows[2].ratio += w.max_over_mean / documents.steps;
    rows[2].seconds += time(w.units) / documents.steps;
  }
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "packed documents: %s, %lld documents in %lld sequences of %d (%.1f%% padding); %d steps of %d x %d\n",
                documents.distribution.text().c_str(), static_cast<long long>(packed.document_count()),
                static_cast<long long>(packed.size()), seq,
                100.0 * static_cast<double>(packed.padding_tokens()) / (static_cast<double>(packed.size()) * seq),
                documents.steps, m, b);
  out += line;
  std::snprintf(line, sizeof line, "  %-16s %22s %14s %14s\n", "order", "max/mean sum(doc^2)", "step (mean)",
                "bubble");
  out += line;
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "  %-16s %22.3f %12.4g s %+13.1f%%\n", r.name.c_str(), r.ratio, r.seconds,
                  100.0 * (r.seconds / rows[0].seconds - 1));
    out += line;
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
