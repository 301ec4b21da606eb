#pragma once
// What a micro-batch's packed documents (sequence_documents.h) mean for training, in the forms the
// engine reads: each position's document start (the attention mask and the per-document
// positions: kernels/attention.h, DocumentMask; model/position_runs.h), and the number of
// targets the loss counts (docs/data.md, "Targets and the loss").
#include <cstdint>
#include <vector>

#include "plait/data/batch_source.h"
#include "plait/data/sequence_documents.h"

namespace plait::data {

// start[b * seq + p]: the position at which the document holding position p of row b begins.
// The padding of a row, [tokens, seq), is one more document of its own (its positions run from
// 0 and it attends only to itself; its targets count nothing). Empty when every row is one
// document of seq tokens -- the stream's rows, or a packed row that one document (or one piece
// of a long one) fills -- since plain causal attention at positions 0.. is then exactly the mask.
std::vector<std::int32_t> document_mask(const std::vector<SequenceDocuments>& rows, int seq);

// attention_pairs[p]: the keys position p attends to under that mask, summed over the rows
// (p - its document's start + 1; p + 1 in a row that is one document): the attention work a
// segment's positions do, which spec/document_partition.h cuts the segments by.
std::vector<std::int64_t> attention_pairs(const std::vector<SequenceDocuments>& rows, int seq);

// The targets of micro-batches [0, microbatches) of step `step` that count in the loss: every
// position but the padding (whose target is kPaddingTarget), i.e. the sum of the rows'
// `tokens`. The loss is normalised by it over the global batch; since sources are pure functions
// of (step, micro-batch), every rank computes the same count without communicating.
std::int64_t counted_targets(const BatchSource& source, std::int64_t step, int microbatches);

}  // namespace plait::data
