#pragma once
// Balanced micro-batches of packed sequences (data.balance "wlb", issue 24 part 4), after
// WLB-LLM's workload-aware variable-length packing (Wang et al. 2025, "WLB-LLM: Workload-Balanced
// 4D Parallelism for Large Language Model Training", OSDI'25, arXiv 2503.17924, section 4): with
// documents masked from each other a sequence's attention work is the sum of its documents'
// squared lengths, so micro-batches of equal tokens carry unequal work and the pipeline's stages
// and the data-parallel replicas wait on the heaviest. WLB-LLM hands each unit of work, heaviest
// first, to the micro-batch with the least work so far (greedy longest-processing-time), and
// delays outliers to later global batches so each batch gets its share of them instead of a few
// batches getting all.
//
// plait keeps its packing (greedy in stream order, packed_sequences.h: sequences of whole
// documents) and balances the packed sequences of a window of consecutive whole steps, by the
// same greedy at two levels: first the window's sequences to its steps (each step takes M x B of
// them), then each step's sequences to its M micro-batches (bins of B rows), each time heaviest
// first to the bin with the least work that still has room. The first level is the outlier delay:
// a heavy sequence may move to another step of its window, so the steps share their outliers
// (with a window of one step it changes nothing); the second balances the micro-batches, and
// with them the data-parallel replicas, which take whole micro-batches. Balancing needs B >= 2
// rows: a micro-batch of one packed sequence carries that sequence's work whatever the order.
//
// The order is a pure function of (the sequences' work, rows, window) and of the window's index:
// the loader's state records rows and window, so a resumed run reads the same samples bit for bit.
#include <cstdint>
#include <span>
#include <vector>

#include "plait/data/sequence_documents.h"

namespace plait::data {

// The attention work of a packed sequence of `seq` positions: the sum of its documents' squared
// lengths, its padding one more document (attention runs over it as over one: document_mask.h).
double sequence_attention_work(const SequenceDocuments& documents, int seq);

// Heaviest first to the least-loaded bin with room: `items` (indices into work) into `bins` bins
// of `capacity` each (bins x capacity == items.size()); equal work in the items' order, equal
// loads to the lower bin. Returns each bin's items in ascending index order.
std::vector<std::vector<std::int64_t>> greedy_bins(std::span<const std::int64_t> items, std::span<const double> work,
                                                   std::int64_t bins, std::int64_t capacity);

// One window's order: work[j] is the work of the window's sample j, the window whole steps of
// `microbatches` micro-batches of `rows` rows. Returns order, order[i] = the sample of the window
// that position i reads: step t's micro-batch b (positions [(t M + b) rows, (t M + b + 1) rows))
// holds the sequences the two greedy levels handed it, in window order. Throws plait::Error
// unless the window is whole steps.
std::vector<std::int64_t> balanced_window_order(std::span<const double> work, int rows, int microbatches);

// max / mean of the micro-batches' work (consecutive bins of `rows` samples): 1 is balanced.
double max_over_mean(std::span<const double> work, int rows);

}  // namespace plait::data
