#pragma once
// A BatchSource that serves one step of another for every step asked: a forward-only evaluation
// runs at the training step's number (failure injection and messages name it) while its batches
// come from validation round r, or a test re-evaluates a training step's batch.
#include <cstdint>

#include "plait/data/batch_source.h"

namespace plait::data {

class FixedStepSource : public BatchSource {
 public:
  // `source` must outlive this object.
  FixedStepSource(const BatchSource& source, std::int64_t step) : source_(source), step_(step) {}
  void fill(std::int64_t, int microbatch, std::int32_t* inputs, std::int32_t* targets) const override {
    source_.fill(step_, microbatch, inputs, targets);
  }
  int seq() const override { return source_.seq(); }
  int microbatch_size() const override { return source_.microbatch_size(); }
  int microbatches_per_step() const override { return source_.microbatches_per_step(); }
  std::vector<SequenceDocuments> documents(std::int64_t, int microbatch) const override {
    return source_.documents(step_, microbatch);
  }

 private:
  const BatchSource& source_;
  std::int64_t step_;
};

}  // namespace plait::data
