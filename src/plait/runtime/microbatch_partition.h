#pragma once
// The sequence partition one micro-batch runs with: the plan's, or with work-aware cuts
// (PipelinePlan::document_cuts, issue 24 part 4) the Seq1F1B flops split cut from that
// micro-batch's own documents (spec/document_partition.h). The runtime learns it from the data:
// every rank reads the micro-batch's documents from its loader (a pure function of step and
// micro-batch) and cuts alike, so the lengths, the message sizes and the K/V prefixes agree on
// every stage without any exchange.
#include <cstdint>
#include <vector>

#include "plait/data/batch_source.h"
#include "plait/data/sequence_documents.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/spec/sequence_partition.h"

namespace plait::runtime {

spec::SequencePartition microbatch_partition(const PipelinePlan& plan,
                                             const std::vector<data::SequenceDocuments>& rows);

// What to plan memory and message buffers for when cuts change per micro-batch: segment i as
// long as the longest segment i of any micro-batch of steps [first, first + steps) (its start the
// sum of the earlier such lengths), so every unit's activations, K/V prefix and messages are at
// most this partition's. Its seq() may exceed the plan's. The plan's partition without cuts.
spec::SequencePartition worst_case_partition(const PipelinePlan& plan, const data::BatchSource& batches,
                                             std::int64_t first, std::int64_t steps);

}  // namespace plait::runtime
