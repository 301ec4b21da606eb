#pragma once
// Per-micro-batch work from packed documents (issue 24 part 5): the same schedule, but each unit's
// time follows the documents of its own micro-batch. A unit (micro-batch, segment) holds `tokens`
// positions (rows x its segment length, which work-aware cuts change per micro-batch) and visits
// `pairs` (query, key) pairs inside documents. Its time is the base model's for the nominal unit
// (the plan's partition, full causal rows: rows x s tokens, rows x (s e - s^2/2) pairs) scaled by
// the FLOPs ratio of its kind, from the terms of flops_cost_model.h:
//   F  ~ A t + P q,   B ~ A t + 2 P q,   W ~ A t,   BW ~ 2 A t + 2 P q
// A, P: spec::segment_work_coefficients (per token, per visited pair). The head's share of A is
// the whole model's on every stage (a stage's own split of A and P would need its layers), and a
// unit's fixed cost per action scales with it; both are small against the attention spread this
// models.
#include <cstdint>
#include <vector>

#include "plait/sim/cost_model.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::sim {

struct UnitWork {
  double tokens = 0;  // rows x segment length
  double pairs = 0;   // (query, key) pairs attention visits, over the rows
};

// work[mb][segment] of each micro-batch of a step (micro-batch ids index it).
using MicrobatchWork = std::vector<std::vector<UnitWork>>;

// The nominal units of `partition`: full causal rows.
std::vector<UnitWork> nominal_work(const spec::SequencePartition& partition, int rows);

class DocumentCostModel : public CostModel {
 public:
  // base: times the nominal units (kept by reference; must outlive this).
  DocumentCostModel(const CostModel& base, const spec::ModelSpec& model, const spec::SequencePartition& partition,
                    int rows, MicrobatchWork work);
  double compute_seconds(int rank, schedule::ActionKind kind, std::int32_t microbatch, std::int32_t segment,
                         std::int32_t vstage) const override;
  double transfer_seconds(int src_rank, int dst_rank, std::int64_t bytes) const override {
    return base_.transfer_seconds(src_rank, dst_rank, bytes);
  }
  // The FLOPs ratio of (microbatch, segment)'s `kind` to the nominal unit's.
  double scale(schedule::ActionKind kind, std::int32_t microbatch, std::int32_t segment) const;

 private:
  const CostModel& base_;
  double per_token_, per_pair_;
  std::vector<UnitWork> nominal_;
  MicrobatchWork work_;
};

}  // namespace plait::sim
