#include "plait/sim/document_work.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"
#include "plait/data/balanced_order.h"
#include "plait/data/document_mask.h"
#include "plait/data/microbatch_shares.h"
#include "plait/data/packed_sequences.h"
#include "plait/data/sequential_loader.h"
#include "plait/data/token_source.h"
#include "plait/spec/document_partition.h"

namespace plait::sim {
namespace {

// A stream of `n` zero tokens that stores none: the document layout is all that is read.
class ZeroTokens : public data::TokenSource {
 public:
  explicit ZeroTokens(std::int64_t n) : n_(n) {}
  std::int64_t size() const override { return n_; }
  void read(std::int64_t, std::span<std::uint16_t> out) const override { std::fill(out.begin(), out.end(), 0); }
  std::string describe() const override { return std::to_string(n_) + " tokens of a document-length distribution"; }

 private:
  std::int64_t n_;
};

// The runtime's split of a step's micro-batches (schedule::replicate: equal consecutive shares).
data::MicrobatchShares replica_shares(const StepDocuments& step, int replicas) {
  const data::MicrobatchShares shares = data::MicrobatchShares::even(replicas, static_cast<int>(step.units.size()));
  if (shares.count(replicas - 1) != shares.count(0)) {
    throw Error("replica_steps: " + std::to_string(step.units.size()) + " micro-batches do not split evenly over " +
                std::to_string(replicas) + " replicas (the runtime gives each replica the same count)");
  }
  return shares;
}

}  // namespace

std::vector<UnitWork> segment_work(std::span<const std::int64_t> pairs, int rows, const spec::SequencePartition& cut) {
  std::vector<UnitWork> units;
  for (int i = 0; i < cut.count(); ++i) {
    const std::int64_t start = cut.start(i), length = cut.lengths[static_cast<std::size_t>(i)];
    double visited = 0;
    for (std::int64_t p = start; p < start + length; ++p) visited += static_cast<double>(pairs[static_cast<std::size_t>(p)]);
    units.push_back({static_cast<double>(rows) * static_cast<double>(length), visited});
  }
  return units;
}

MicrobatchDocuments microbatch_documents(const spec::ModelSpec& model, const std::vector<data::SequenceDocuments>& rows,
                                         int seq, const DocumentCuts& cuts) {
  MicrobatchDocuments out;
  const int b = static_cast<int>(rows.size());
  const std::vector<std::int64_t> pairs = data::attention_pairs(rows, seq);
  out.cut = cuts.cuts ? spec::document_partition(model, pairs, b, cuts.nominal.count(), cuts.multiple) : cuts.nominal;
  out.units = segment_work(pairs, b, out.cut);
  for (const data::SequenceDocuments& r : rows) out.attention += data::sequence_attention_work(r, seq);
  return out;
}

StepDocuments step_documents(const spec::ModelSpec& model, const data::BatchSource& batches, std::int64_t step,
                             const DocumentCuts& cuts) {
  StepDocuments out;
  out.longest.assign(static_cast<std::size_t>(cuts.nominal.count()), 0);
  for (int mb = 0; mb < batches.microbatches_per_step(); ++mb) {
    MicrobatchDocuments m = microbatch_documents(model, batches.documents(step, mb), batches.seq(), cuts);
    for (std::size_t i = 0; i < out.longest.size(); ++i) out.longest[i] = std::max(out.longest[i], m.cut.lengths[i]);
    out.attention.push_back(m.attention);
    out.units.push_back(std::move(m.units));
  }
  out.max_over_mean = data::max_over_mean(out.attention, 1);
  return out;
}

std::vector<double> replica_attention(const StepDocuments& step, int replicas) {
  const data::MicrobatchShares shares = replica_shares(step, replicas);
  std::vector<double> out;
  for (int q = 0; q < replicas; ++q) {
    double attention = 0;
    for (int mb = shares.first(q); mb < shares.first(q) + shares.count(q); ++mb) {
      attention += step.attention.at(static_cast<std::size_t>(mb));
    }
    out.push_back(attention);
  }
  return out;
}

ReplicaSteps replica_steps(const StepDocuments& step, int replicas,
                           const std::function<double(const MicrobatchWork&)>& time) {
  const data::MicrobatchShares shares = replica_shares(step, replicas);
  ReplicaSteps out;
  out.attention = replica_attention(step, replicas);
  for (int q = 0; q < replicas; ++q) {
    const auto first = step.units.begin() + shares.first(q);
    out.seconds.push_back(time(MicrobatchWork(first, first + shares.count(q))));
    out.slowest = std::max(out.slowest, out.seconds.back());
  }
  return out;
}

MicrobatchWork equal_work(const MicrobatchWork& units) {
  std::vector<UnitWork> mean(units.front().size());
  for (const auto& mb : units) {
    for (std::size_t i = 0; i < mb.size(); ++i) {
      mean[i].tokens += mb[i].tokens / static_cast<double>(units.size());
      mean[i].pairs += mb[i].pairs / static_cast<double>(units.size());
    }
  }
  return MicrobatchWork(units.size(), mean);
}

DocumentStream::DocumentStream(const data::DocumentDistribution& distribution, int seq, int rows, int microbatches,
                               int steps, int balance_window) {
  const std::int64_t tokens = 2 * std::int64_t{steps} * microbatches * rows * seq + 2 * std::int64_t{seq};
  source_ = std::make_unique<ZeroTokens>(tokens);
  packed_ = std::make_unique<data::PackedSequences>(data::distribution_starts(distribution, tokens - 1), tokens, seq);
  loader_ = std::make_unique<data::SequentialLoader>(*source_, seq, rows, data::MicrobatchShares({microbatches}),
                                                     data::DataPosition{}, packed_.get(),
                                                     data::SequenceBalance{balance_window});
}

DocumentStream::~DocumentStream() = default;

const data::BatchSource& DocumentStream::loader() const { return *loader_; }

}  // namespace plait::sim
