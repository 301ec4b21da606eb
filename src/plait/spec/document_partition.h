#pragma once
// The Seq1F1B flops split cut from one micro-batch's own documents (issue 24 part 4). With
// documents masked from each other a query attends only to the earlier keys of its document, so
// a segment's attention work is the (query, key) pairs its rows visit inside their documents, not
// the full causal triangle that flops_partition assumes. The cost of a segment is
//   a * tokens + b * visited pairs,
// a = the per-token forward FLOPs of the LM head and every layer's matmuls, b = every layer's
// attention FLOPs per visited pair: the terms of ModelSpec::segment_forward_flops (Seq1F1B, Sun
// et al. 2025, arXiv 2406.03488, its FLOPs split; Narayanan et al. 2021, the Megatron FLOPs
// formula), whose (s e - s^2/2) is the causal pair count of a segment ending at e.
//
// The cut is a pure function of (each position's visible keys, k, the model's coefficients,
// the rounding multiple), so every rank that reads the micro-batch's documents from the loader
// computes the same lengths without talking to the others.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::spec {

// Forward FLOPs per sample: `per_token` for each token (head + the layers' matmuls) and
// `per_pair` for each (query, key) pair attention visits (all layers).
struct SegmentWorkCoefficients {
  double per_token = 0;
  double per_pair = 0;
};
SegmentWorkCoefficients segment_work_coefficients(const ModelSpec& model);

// pairs[p]: the keys position p attends to, summed over the micro-batch's `rows` rows (p - the
// start of p's document + 1 in each row; p + 1 in a row that is one document). Returns, per
// position, the micro-batch's forward FLOPs of that position: rows * per_token + per_pair *
// pairs[p].
std::vector<double> position_work(const ModelSpec& model, std::span<const std::int64_t> pairs, int rows);

// k segments of equal work: boundary i (the end of segment i) is the multiple of `multiple`
// whose prefix work is nearest to (i + 1) / k of the total (ties to the earlier one), kept at
// least `multiple` tokens after the previous boundary and leaving `multiple` tokens for each
// later segment; the last segment ends at the sequence's end. Each segment's `flops` is its
// work per sample (the micro-batch's divided by `rows`). `split` is flops. Throws plait::Error
// unless 1 <= k, and k * multiple <= seq (multiple divides seq when multiple > 1).
SequencePartition work_partition(std::span<const double> work, int rows, int segments,
                                 std::int64_t multiple = 1);

// The cut of one micro-batch of `rows` rows whose positions visit `pairs` keys (position_work):
// work_partition of its position work. What the runtime runs (runtime/microbatch_partition.h)
// and what the simulator and planner predict it runs (sim/document_work.h).
SequencePartition document_partition(const ModelSpec& model, std::span<const std::int64_t> pairs, int rows,
                                     int segments, std::int64_t multiple = 1);

}  // namespace plait::spec
