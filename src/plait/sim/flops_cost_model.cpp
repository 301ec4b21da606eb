#include "plait/sim/flops_cost_model.h"

#include <algorithm>

#include "plait/core/error.h"
#include "plait/spec/tensor_parallel_plan.h"

namespace plait::sim {

using schedule::ActionKind;

double UnitFlops::total(ActionKind kind) const {
  switch (kind) {
    case ActionKind::F: return layers * layer_forward + head_forward;
    case ActionKind::B: return layers * layer_backward_input + head_backward_input;
    case ActionKind::W: return layers * layer_backward_weight + head_backward_weight;
    case ActionKind::BW:
      return total(ActionKind::B) + total(ActionKind::W);
  }
  return 0.0;
}

FlopsCostModel::FlopsCostModel(const spec::ModelSpec& model, std::vector<int> vstage_layers,
                               const spec::SequencePartition& partition, int microbatch_size,
                               std::vector<DeviceProfile> rank_devices)
    : segments_(static_cast<int>(partition.lengths.size())),
      hidden_(model.hidden),
      vstage_layers_(vstage_layers),
      devices_(std::move(rank_devices)) {
  if (devices_.empty()) throw Error("FlopsCostModel: no device profile");
  const int vstages = static_cast<int>(vstage_layers.size());
  const double b = microbatch_size;
  flops_.resize(static_cast<std::size_t>(vstages) * segments_);
  for (int seg = 0; seg < segments_; ++seg) {
    const std::int64_t len = partition.lengths[seg];
    const double linear = b * model.layer_linear_flops(len);
    const double attention = b * model.layer_attention_flops(partition.start(seg), len);
    const double head = b * 2.0 * static_cast<double>(len) * model.hidden * model.vocab;
    const double recompute = b * model.layer_recompute_flops(partition.start(seg), len);
    for (int s = 0; s < vstages; ++s) {
      UnitFlops& u = flops_[static_cast<std::size_t>(s) * segments_ + seg];
      u.layers = vstage_layers[s];
      u.layer_forward = linear + attention;
      u.layer_backward_input = linear + 2.0 * attention;
      u.layer_backward_weight = linear;
      u.layer_recompute = recompute;
      u.embedding = s == 0;
      u.head = s == vstages - 1;
      u.tokens = b * static_cast<double>(len);
      if (s == vstages - 1) {
        u.head_forward = u.head_backward_input = u.head_backward_weight = head;
      }
    }
  }
  time_units();
}

void FlopsCostModel::set_recompute(const spec::Recompute& recompute) {
  std::vector<int> counts;
  try {
    counts = recompute.resolve(vstage_layers_);
  } catch (const Error& e) {
    throw Error(std::string("cost model: recompute: ") + e.what());
  }
  for (std::size_t i = 0; i < flops_.size(); ++i) {
    flops_[i].recompute_layers = counts[i / static_cast<std::size_t>(segments_)];
  }
  time_units();
}

void FlopsCostModel::set_tensor_parallel(std::vector<RankTensorParallel> ranks, double element_bytes) {
  if (ranks.empty()) throw Error("cost model: tensor parallelism for no rank");
  tp_element_bytes_ = element_bytes;
  if (ranks.size() > 1 && devices_.size() == 1) {
    // Ranks now differ (in their TP groups): one device slot per rank.
    devices_.assign(ranks.size(), devices_.front());
  }
  if (ranks.size() == 1) ranks.assign(devices_.size(), ranks.front());
  if (ranks.size() != devices_.size()) {
    throw Error("cost model: tensor parallelism for " + std::to_string(ranks.size()) + " ranks, devices for " +
                std::to_string(devices_.size()));
  }
  tp_ = std::move(ranks);
  time_units();
}

int FlopsCostModel::tensor_parallel(int rank) const {
  if (tp_.empty()) return 1;
  return tp_.size() == 1 ? tp_[0].degree : tp_.at(static_cast<std::size_t>(rank)).degree;
}

void FlopsCostModel::time_units() {
  seconds_.assign(devices_.size() * flops_.size() * 4, 0.0);
  recompute_seconds_.assign(devices_.size() * flops_.size(), 0.0);
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    const DeviceProfile& dev = devices_[d];
    const RankTensorParallel tp = tp_.empty() ? RankTensorParallel{} : tp_[d];
    const double t = tp.degree;
    for (std::size_t i = 0; i < flops_.size(); ++i) {
      const UnitFlops& u = flops_[i];
      const double backward = u.layer_backward_input + u.layer_backward_weight;
      // One device's share of the TP group's work, on the device curve at that work, plus the
      // pass's collectives (spec/tensor_parallel_plan.h).
      auto collectives = [&](spec::UnitPass pass) {
        return spec::tp_collective_seconds(spec::tp_collectives(pass, u.layers, u.embedding, u.head), u.tokens,
                                           hidden_, tp_element_bytes_, tp.degree, tp.link.latency_seconds,
                                           tp.link.bandwidth_bytes_per_second);
      };
      double* out = &seconds_[(d * flops_.size() + i) * 4];
      out[0] = dev.forward_seconds(u.layers, u.layer_forward / t, u.head_forward / t) +
               collectives(spec::UnitPass::forward);
      out[1] = dev.backward_seconds(u.layers, u.layer_backward_input / t, u.layer_backward_input / backward,
                                    u.head_backward_input / t) +
               collectives(spec::UnitPass::backward_input);
      out[2] = dev.backward_seconds(u.layers, u.layer_backward_weight / t, u.layer_backward_weight / backward,
                                    u.head_backward_weight / t) +
               collectives(spec::UnitPass::backward_weight);
      out[3] = out[1] + out[2];  // the work of B and W; the fixed cost is added per action
      // A recomputed layer's rebuild gathers its two column-parallel inputs again.
      const double rebuild_gathers =
          u.recompute_layers * 2 *
          spec::ring_collective_seconds(spec::Collective::all_gather, u.tokens * hidden_ * tp_element_bytes_, tp.degree,
                                        tp.link.latency_seconds, tp.link.bandwidth_bytes_per_second);
      recompute_seconds_[d * flops_.size() + i] =
          u.recompute_layers > 0 ? dev.forward_seconds(u.recompute_layers, u.layer_recompute / t, 0.0) + rebuild_gathers
                                 : 0.0;
    }
  }
}

const DeviceProfile& FlopsCostModel::device(int rank) const {
  return devices_.size() == 1 ? devices_[0] : devices_.at(static_cast<std::size_t>(rank));
}

double FlopsCostModel::compute_seconds(int rank, ActionKind kind, std::int32_t, std::int32_t segment,
                                       std::int32_t vstage) const {
  const std::size_t d = devices_.size() == 1 ? 0 : static_cast<std::size_t>(rank);
  const std::size_t i = static_cast<std::size_t>(vstage) * segments_ + segment;
  const double* s = &seconds_[(d * flops_.size() + i) * 4];
  // Recomputation rebuilds inside the same action; every action pays its device's fixed cost once.
  const double recompute =
      schedule::is_backward_input(kind) ? recompute_seconds_[d * flops_.size() + i] : 0.0;
  return s[static_cast<int>(kind)] + recompute + devices_[d].action_overhead_seconds;
}

double FlopsCostModel::transfer_seconds(int src_rank, int dst_rank, std::int64_t bytes) const {
  // A cluster's per-pair link, else the sender's port (one NIC per device). A TP group's devices
  // each send their 1/t sequence slice through their own port.
  const std::int64_t share = bytes / std::min(tensor_parallel(src_rank), tensor_parallel(dst_rank));
  if (!links_.empty()) return links_.at(src_rank, dst_rank).transfer_seconds(share);
  return device(src_rank).link.transfer_seconds(share);
}

}  // namespace plait::sim
