#include "plait/sim/document_cost_model.h"

#include <string>

#include "plait/core/error.h"
#include "plait/spec/document_partition.h"

namespace plait::sim {

std::vector<UnitWork> nominal_work(const spec::SequencePartition& partition, int rows) {
  std::vector<UnitWork> out;
  for (int i = 0; i < partition.count(); ++i) {
    const double s = static_cast<double>(partition.lengths[static_cast<std::size_t>(i)]);
    const double e = static_cast<double>(partition.start(i)) + s;
    out.push_back({rows * s, rows * (s * e - s * s / 2)});  // layer_attention_flops's pair count
  }
  return out;
}

DocumentCostModel::DocumentCostModel(const CostModel& base, const spec::ModelSpec& model,
                                     const spec::SequencePartition& partition, int rows, MicrobatchWork work)
    : base_(base), nominal_(nominal_work(partition, rows)), work_(std::move(work)) {
  const spec::SegmentWorkCoefficients c = spec::segment_work_coefficients(model);
  per_token_ = c.per_token;
  per_pair_ = c.per_pair;
  for (std::size_t mb = 0; mb < work_.size(); ++mb) {
    if (work_[mb].size() != nominal_.size()) {
      throw Error("document cost model: micro-batch " + std::to_string(mb) + " has " +
                  std::to_string(work_[mb].size()) + " segments, the partition " + std::to_string(nominal_.size()));
    }
  }
}

double DocumentCostModel::scale(schedule::ActionKind kind, std::int32_t microbatch, std::int32_t segment) const {
  if (work_.empty()) return 1.0;
  const UnitWork& w = work_[static_cast<std::size_t>(microbatch) % work_.size()][static_cast<std::size_t>(segment)];
  const UnitWork& n = nominal_[static_cast<std::size_t>(segment)];
  auto flops = [&](const UnitWork& u) {
    switch (kind) {
      case schedule::ActionKind::F: return per_token_ * u.tokens + per_pair_ * u.pairs;
      case schedule::ActionKind::B: return per_token_ * u.tokens + 2 * per_pair_ * u.pairs;
      case schedule::ActionKind::W: return per_token_ * u.tokens;
      case schedule::ActionKind::BW: return 2 * per_token_ * u.tokens + 2 * per_pair_ * u.pairs;
    }
    return 0.0;
  };
  return flops(w) / flops(n);
}

double DocumentCostModel::compute_seconds(int rank, schedule::ActionKind kind, std::int32_t microbatch,
                                          std::int32_t segment, std::int32_t vstage) const {
  return base_.compute_seconds(rank, kind, microbatch, segment, vstage) * scale(kind, microbatch, segment);
}

}  // namespace plait::sim
