#pragma once
// The run summary's memory table: every rank's measured peak bytes by category (with the stages
// it holds), gathered to rank 0 (runtime/memory_reports.h). The per-category columns are each
// category's own peak; "total" is the peak of the sum.
#include <cstdio>
#include <vector>

#include "plait/core/memory_tracker.h"
#include "plait/runtime/pipeline_plan.h"

namespace plait::cli {

void print_rank_memory_table(std::FILE* out, const runtime::PipelinePlan& plan,
                             const std::vector<MemoryReport>& reports);
// The host tier's peaks (offloaded optimizer state, master weights, staged gradients) of every
// rank, against its host_memory_bytes; nothing when no rank used its host tier.
void print_host_memory_table(std::FILE* out, const runtime::PipelinePlan& plan,
                             const std::vector<MemoryReport>& reports);

}  // namespace plait::cli
