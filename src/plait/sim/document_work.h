#pragma once
// The work of packed documents per micro-batch and segment (issue 24 part 5), one function for
// every user: plait sim --documents, the planner's document-aware plans and plait bench runtime
// speed's document rows. A micro-batch's rows are cut as the runtime cuts them
// (spec::document_partition: the flops split from its own documents, or the nominal partition),
// and each segment's unit holds rows x its length tokens and the (query, key) pairs its rows'
// queries visit inside their documents (data::attention_pairs), what DocumentCostModel times.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "plait/data/batch_source.h"
#include "plait/data/document_distribution.h"
#include "plait/data/sequence_documents.h"
#include "plait/sim/document_cost_model.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::data {
class PackedSequences;
class SequentialLoader;
class TokenSource;
}  // namespace plait::data

namespace plait::sim {

// How a micro-batch is cut: `nominal` (the plan's partition), and with `cuts` (work-aware
// segments: PipelinePlan::document_cuts) each micro-batch's own flops split, its lengths
// multiples of `multiple`.
struct DocumentCuts {
  spec::SequencePartition nominal;
  bool cuts = false;
  std::int64_t multiple = 1;
};

// The units of a micro-batch whose keys visited per position are `pairs` (summed over its
// `rows` rows), cut by `cut`: {rows x length, the pairs of the segment's positions}.
std::vector<UnitWork> segment_work(std::span<const std::int64_t> pairs, int rows, const spec::SequencePartition& cut);

struct MicrobatchDocuments {
  spec::SequencePartition cut;  // the partition it runs with
  std::vector<UnitWork> units;  // per segment
  double attention = 0;         // sum(doc^2) over its rows (data::sequence_attention_work)
};
MicrobatchDocuments microbatch_documents(const spec::ModelSpec& model, const std::vector<data::SequenceDocuments>& rows,
                                         int seq, const DocumentCuts& cuts);

struct StepDocuments {
  MicrobatchWork units;                // [micro-batch][segment]
  std::vector<std::int64_t> longest;   // per segment: the longest of any micro-batch's cut
  double max_over_mean = 1;            // of sum(doc^2) per micro-batch
  std::vector<double> attention;       // per micro-batch: sum(doc^2) over its rows
};
// Every micro-batch of `step` as `batches` reads it.
StepDocuments step_documents(const spec::ModelSpec& model, const data::BatchSource& batches, std::int64_t step,
                             const DocumentCuts& cuts);

// Every micro-batch carrying the step's mean unit work, segment by segment ("equal work").
MicrobatchWork equal_work(const MicrobatchWork& units);

// Data-parallel replicas: a step's micro-batches (all replicas', as the loader reads them: the
// balanced order balances them all, data/balanced_order.h) split as the runtime hands them out
// (schedule::replicate: replica q runs global micro-batches [q m, (q+1) m), the shares of
// data::MicrobatchShares::even), each replica's pipeline timed by `time` on its own units. The
// replicas' pipelines are independent until the gradient reduction, which starts when the
// slowest has finished (WLB-LLM's straggler across data-parallel ranks): its reduction is the
// same bytes in any order, so the order's cost is the slowest replica's pipeline.
struct ReplicaSteps {
  std::vector<double> seconds;    // per replica
  std::vector<double> attention;  // per replica: sum(doc^2) of its micro-batches
  double slowest = 0;             // max of seconds
};
ReplicaSteps replica_steps(const StepDocuments& step, int replicas,
                           const std::function<double(const MicrobatchWork&)>& time);
// Per replica: sum(doc^2) of its micro-batches (the split replica_steps times).
std::vector<double> replica_attention(const StepDocuments& step, int replicas);

// Packed documents of a named distribution read as a run reads them: lengths drawn from
// `distribution` over a stream long enough for `steps` steps of `microbatches` micro-batches
// of `rows` sequences of `seq` (twice over: packing pads, more with a long tail), packed as
// data.packing "documents" does (data/packed_sequences.h) and read by the run's loader, in plain
// order (balance_window 0) or balanced (data.balance "wlb", windows of balance_window steps).
// Only the layout is read: the stream's tokens are zeros that are never stored.
class DocumentStream {
 public:
  DocumentStream(const data::DocumentDistribution& distribution, int seq, int rows, int microbatches, int steps,
                 int balance_window);
  ~DocumentStream();
  DocumentStream(const DocumentStream&) = delete;
  DocumentStream& operator=(const DocumentStream&) = delete;
  const data::BatchSource& loader() const;
  const data::PackedSequences& packed() const { return *packed_; }

 private:
  std::unique_ptr<data::TokenSource> source_;
  std::unique_ptr<data::PackedSequences> packed_;
  std::unique_ptr<data::SequentialLoader> loader_;
};

}  // namespace plait::sim
