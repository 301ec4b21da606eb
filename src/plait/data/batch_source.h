#pragma once
// What the engine and runtime call to get a micro-batch: inputs and targets for global
// micro-batch `microbatch` of step `step`. Implemented by BatchLoader (random windows of an
// in-memory stream) and SequentialLoader (llm.c-style sequential windows of any TokenSource,
// resumable). Both are pure functions of (step, microbatch), so any rank can fill any
// micro-batch without talking to the others.
#include <cstdint>
#include <vector>

#include "plait/data/sequence_documents.h"

namespace plait::data {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // inputs, targets: microbatch_size() x seq() row-major; targets are inputs shifted by one.
  virtual void fill(std::int64_t step, int microbatch, std::int32_t* inputs,
                    std::int32_t* targets) const = 0;
  virtual int seq() const = 0;
  virtual int microbatch_size() const = 0;
  virtual int microbatches_per_step() const = 0;
  // The documents inside each row of that micro-batch (microbatch_size() of them). A source
  // that does not pack documents reports each row as one document of seq() tokens: that is what
  // its rows are trained as (attention across the whole row).
  virtual std::vector<SequenceDocuments> documents(std::int64_t step, int microbatch) const {
    return std::vector<SequenceDocuments>(static_cast<std::size_t>(microbatch_size()), SequenceDocuments{{0}, seq(), false});
  }
};

}  // namespace plait::data
