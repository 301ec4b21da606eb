#include "plait/runtime/microbatch_partition.h"

#include <algorithm>

#include "plait/data/document_mask.h"
#include "plait/spec/document_partition.h"

namespace plait::runtime {

spec::SequencePartition microbatch_partition(const PipelinePlan& plan,
                                             const std::vector<data::SequenceDocuments>& rows) {
  if (!plan.document_cuts) return plan.partition;
  return spec::document_partition(plan.model, data::attention_pairs(rows, plan.seq), static_cast<int>(rows.size()),
                                  plan.partition.count(), plan.cut_multiple);
}

spec::SequencePartition worst_case_partition(const PipelinePlan& plan, const data::BatchSource& batches,
                                             std::int64_t first, std::int64_t steps) {
  if (!plan.document_cuts) return plan.partition;
  std::vector<std::int64_t> longest(static_cast<std::size_t>(plan.partition.count()), 0);
  for (std::int64_t s = first; s < first + steps; ++s) {
    for (int mb = 0; mb < plan.global_microbatches(); ++mb) {
      const spec::SequencePartition cut = microbatch_partition(plan, batches.documents(s, mb));
      for (std::size_t i = 0; i < longest.size(); ++i) longest[i] = std::max(longest[i], cut.lengths[i]);
    }
  }
  return spec::partition_from_lengths(plan.model, longest);
}

}  // namespace plait::runtime
