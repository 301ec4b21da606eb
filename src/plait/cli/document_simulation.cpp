#include "plait/cli/document_simulation.h"

#include <algorithm>
#include <cstdio>

#include "plait/data/balanced_order.h"
#include "plait/data/document_mask.h"
#include "plait/data/packed_sequences.h"
#include "plait/data/sequential_loader.h"
#include "plait/data/token_source.h"
#include "plait/spec/document_partition.h"
#include "plait/spec/precision_policy.h"

namespace plait::cli {
namespace {

struct StepWork {
  sim::MicrobatchWork units;  // [micro-batch][segment]
  double max_over_mean = 1;   // of sum(doc^2) per micro-batch
  std::int64_t longest = 0;   // longest segment
};

StepWork step_work(const sim::SimulationConfig& config, const spec::SequencePartition& nominal, bool cuts,
                   const data::SequentialLoader& loader, std::int64_t step) {
  StepWork out;
  const int seq = static_cast<int>(config.seq);
  std::vector<double> squares;
  for (int mb = 0; mb < loader.microbatches_per_step(); ++mb) {
    const std::vector<data::SequenceDocuments> rows = loader.documents(step, mb);
    double sum = 0;
    for (const data::SequenceDocuments& r : rows) sum += data::sequence_attention_work(r, seq);
    squares.push_back(sum);
    const std::vector<std::int64_t> pairs = data::attention_pairs(rows, seq);
    const int b = static_cast<int>(rows.size());
    // The cut the runtime would run (runtime/microbatch_partition.h), from the same terms.
    const spec::SequencePartition cut =
        cuts ? spec::work_partition(spec::position_work(config.model.model, pairs, b), b, nominal.count(),
                                    config.split_multiple)
             : nominal;
    std::vector<sim::UnitWork> units;
    for (int i = 0; i < cut.count(); ++i) {
      const std::int64_t start = cut.start(i), length = cut.lengths[static_cast<std::size_t>(i)];
      double visited = 0;
      for (std::int64_t p = start; p < start + length; ++p) visited += static_cast<double>(pairs[p]);
      units.push_back({static_cast<double>(b) * static_cast<double>(length), visited});
      out.longest = std::max(out.longest, length);
    }
    out.units.push_back(std::move(units));
  }
  out.max_over_mean = data::max_over_mean(squares, 1);
  return out;
}

// Every micro-batch of the step carries the step's mean unit work.
sim::MicrobatchWork equal_work(const sim::MicrobatchWork& units) {
  std::vector<sim::UnitWork> mean(units.front().size());
  for (const auto& mb : units) {
    for (std::size_t i = 0; i < mb.size(); ++i) {
      mean[i].tokens += mb[i].tokens / static_cast<double>(units.size());
      mean[i].pairs += mb[i].pairs / static_cast<double>(units.size());
    }
  }
  return sim::MicrobatchWork(units.size(), mean);
}

}  // namespace

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
  // Enough documents for the steps (packing pads ~10%; twice over for a long tail's padding).
  const std::int64_t tokens = 2 * std::int64_t{documents.steps} * m * b * seq + 2 * std::int64_t{seq};
  const data::PackedSequences packed(data::distribution_starts(documents.distribution, tokens - 1), tokens, seq);
  const std::vector<std::uint16_t> stream(static_cast<std::size_t>(tokens));
  const data::TokenSpanSource source(stream);
  const data::MicrobatchShares shares({m});
  const data::SequentialLoader plain(source, seq, b, shares, {}, &packed);
  const data::SequentialLoader balanced(source, seq, b, shares, {}, &packed, {documents.window_steps});

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
    const StepWork p = step_work(config, nominal, cuts, plain, s);
    const StepWork w = step_work(config, nominal, cuts, balanced, s);
    longest = std::max({longest, p.longest, w.longest});
    rows[0].ratio += 1.0 / documents.steps;
    rows[0].seconds += time(equal_work(p.units)) / documents.steps;
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
