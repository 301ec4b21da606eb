#include "plait/plan/plan_documents.h"

#include <algorithm>

#include "plait/core/error.h"

namespace plait::plan {

DocumentLoads::DocumentLoads(DocumentPlanning planning, spec::ModelSpec model, std::int64_t seq,
                             std::int64_t global_batch)
    : planning_(std::move(planning)), model_(std::move(model)), seq_(seq), global_batch_(global_batch) {
  if (planning_.steps < 1) throw Error("document planning: at least one step must be drawn");
}

DocumentLoads::~DocumentLoads() = default;

const DocumentLoad& DocumentLoads::load(int microbatch_size, const spec::SequencePartition& nominal,
                                        std::int64_t multiple) const {
  const bool cuts = nominal.count() > 1 && nominal.split == spec::SplitMethod::flops;
  const auto key = std::make_tuple(microbatch_size, nominal.lengths, cuts ? multiple : 0);
  if (auto it = loads_.find(key); it != loads_.end()) return it->second;
  auto& stream = streams_[microbatch_size];
  if (!stream) {
    stream = std::make_unique<sim::DocumentStream>(planning_.distribution, static_cast<int>(seq_), microbatch_size,
                                                   static_cast<int>(global_batch_ / microbatch_size), planning_.steps,
                                                   planning_.balance_window);
  }
  DocumentLoad load;
  load.cuts = cuts;
  const sim::DocumentCuts how{nominal, cuts, multiple};
  std::vector<std::int64_t> longest(static_cast<std::size_t>(nominal.count()), 0);
  for (int s = 0; s < planning_.steps; ++s) {
    load.steps.push_back(sim::step_documents(model_, stream->loader(), s, how));
    for (std::size_t i = 0; i < longest.size(); ++i) longest[i] = std::max(longest[i], load.steps.back().longest[i]);
  }
  load.worst = cuts ? spec::partition_from_lengths(model_, longest) : nominal;
  return loads_.emplace(key, std::move(load)).first->second;
}

}  // namespace plait::plan
