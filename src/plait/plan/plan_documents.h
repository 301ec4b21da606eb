#pragma once
// Plans for packed documents (issue 24 part 5; docs/planner.md, "Packed documents"). With
// documents packed into sequences and masked from each other, each micro-batch carries its own
// attention work, and with a flops split each is cut from its own documents
// (runtime/microbatch_partition.h), so segment lengths change from micro-batch to micro-batch.
// The planner plans for the worst micro-batch, not the average:
//   memory  -- activations, K/V prefixes and stage messages for the worst cut: segment i as long
//              as the longest segment i of any micro-batch of the steps drawn (what the runtime
//              plans for, runtime::worst_case_partition); without per-micro-batch cuts the
//              lengths are the plan's and memory does not change;
//   time    -- each drawn step simulated with every micro-batch's units from its own documents
//              (sim/document_cost_model.h); the plan's step is the slowest step's, and the report
//              compares it with the same step's work spread equally over its micro-batches.
// The documents are drawn from a length distribution (data/document_distribution.h: a named one
// or a corpus's histogram) and read with the run's packing and loader (sim/document_work.h), in
// plain order or balanced (data.balance "wlb").
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "plait/data/document_distribution.h"
#include "plait/sim/document_work.h"
#include "plait/spec/model_spec.h"
#include "plait/spec/sequence_partition.h"

namespace plait::plan {

struct DocumentPlanning {
  data::DocumentDistribution distribution;
  int steps = 8;           // steps drawn; the plan is made for the worst of them
  int balance_window = 0;  // 0: plain order; n >= 1: data.balance "wlb", windows of n steps
};

// The micro-batches of the drawn steps under one (micro-batch size, nominal partition, multiple).
struct DocumentLoad {
  bool cuts = false;  // each micro-batch cut from its documents (a flops split of k > 1)
  std::vector<sim::StepDocuments> steps;
  // What memory and messages are planned for: segment i as long as the longest segment i of any
  // micro-batch (its start the sum of the earlier ones, so its K/V prefix is the longest too;
  // its seq() may exceed the plan's); the nominal partition without cuts.
  spec::SequencePartition worst;
};

class DocumentLoads {
 public:
  DocumentLoads(DocumentPlanning planning, spec::ModelSpec model, std::int64_t seq, std::int64_t global_batch);
  ~DocumentLoads();
  const DocumentPlanning& planning() const { return planning_; }
  // Computed once per key and kept (the planner asks for each micro-batch size and segment
  // option many times).
  const DocumentLoad& load(int microbatch_size, const spec::SequencePartition& nominal, std::int64_t multiple) const;

 private:
  DocumentPlanning planning_;
  spec::ModelSpec model_;
  std::int64_t seq_, global_batch_;
  mutable std::map<int, std::unique_ptr<sim::DocumentStream>> streams_;  // by micro-batch size
  mutable std::map<std::tuple<int, std::vector<std::int64_t>, std::int64_t>, DocumentLoad> loads_;
};

// What a plan's prediction says of its documents (plan_report.h prints it).
struct DocumentPrediction {
  std::string distribution;  // DocumentDistribution::text()
  int steps = 0, balance_window = 0;
  bool cuts = false;
  int worst_step = 0;                  // the drawn step with the longest simulated step
  double worst_seconds = 0;            // its pipeline time (the plan's)
  double mean_seconds = 0;             // the mean over the drawn steps
  double equal_seconds = 0;            // the worst step with its work spread equally
  double nominal_seconds = 0;          // full causal rows, no documents
  double max_over_mean = 1;            // of sum(doc^2) per micro-batch in the worst step
  std::vector<std::int64_t> worst_cut, nominal_cut;
  double message_bytes = 0, nominal_message_bytes = 0;  // the longest segment's stage message
};

}  // namespace plait::plan
