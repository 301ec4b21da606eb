#pragma once
// Durations from FLOPs: the partition formula's terms per layer and per segment (attention cost
// grows with the segment's prefix), timed by each rank's device profile.
//
// Per layer and sample, forward = linear + attention (spec::ModelSpec's formulas, seq1f1b.md
// generalised to grouped K/V and SwiGLU):
//   linear    = 2sC(2C + 2K) + 2sCF * mlp_matrices
//   attention = (4d+3)*n_h*(s*e - s^2/2)        (e = segment end)
// Backward = 2 x forward, split as
//   B = linear + 2 * attention,   W = linear
// because every weight matmul Y = X W has an input-gradient matmul dX = dY W^T and a
// weight-gradient matmul dW = X^T dY of the same size as the forward, while the attention core
// (QK^T, softmax, PV) has no weights and its whole backward, about twice its forward, produces
// input gradients. A recomputed layer's B also pays its rebuild (set_recompute). The last
// stage adds the LM head, 2*s*H*V for each of F, B and W. (The
// formula's other 2*s*H*V counts the embedding as a matmul; it is a lookup, so it costs no
// time here.) All terms are multiplied by the micro-batch size. Every action also pays its
// device's fixed cost per action (DeviceProfile::action_overhead_seconds; a fused BW pays it
// once), and every message its link's latency.
//
// Tensor parallelism (set_tensor_parallel; spec/tensor_parallel_plan.h): a rank is then a TP
// group of t devices running every action together. Each device does 1/t of every FLOP term, so
// its time is the device curve evaluated at the PER-GPU work (FLOPs / t: smaller kernels, lower
// efficiency, the same fixed cost per layer), plus the action's TP collectives
// (spec::tp_collectives: per layer two all-gathers and two reduce-scatters in F and in B, two
// all-gathers in W) as rings over the rank's machine link, not overlapped with compute. A message
// between stages is sent by every device of the group, each its 1/t sequence slice through its
// own port, so it costs latency + bytes / (min(t_src, t_dst) x bandwidth) (when the two groups
// differ, the smaller one's ports carry the whole activation).
#include <vector>

#include "plait/spec/model_spec.h"
#include "plait/spec/recompute.h"
#include "plait/spec/sequence_partition.h"
#include "plait/sim/cost_model.h"
#include "plait/sim/device_profile.h"
#include "plait/sim/link_matrix.h"

namespace plait::sim {

// FLOPs of one (segment, virtual stage) unit per micro-batch, by kind (F, B, W; BW = B + W).
struct UnitFlops {
  double layer_forward = 0, layer_backward_input = 0, layer_backward_weight = 0;  // per layer
  double head_forward = 0, head_backward_input = 0, head_backward_weight = 0;     // LM head
  double layer_recompute = 0;  // per recomputed layer (spec::ModelSpec::layer_recompute_flops)
  int layers = 0;
  int recompute_layers = 0;  // of `layers`; their rebuild is charged to B (and BW)
  bool embedding = false, head = false;  // the first / last virtual stage
  double tokens = 0;                     // micro-batch size x segment length
  double total(schedule::ActionKind kind) const;
};

// A rank's tensor parallelism: its TP group's size and the link its collectives ring over.
struct RankTensorParallel {
  int degree = 1;
  LinkProfile link;
};

class FlopsCostModel : public CostModel {
 public:
  // rank_devices: one per rank, or one for all. vstage_layers: layers of each virtual stage.
  FlopsCostModel(const spec::ModelSpec& model, std::vector<int> vstage_layers,
                 const spec::SequencePartition& partition, int microbatch_size,
                 std::vector<DeviceProfile> rank_devices);

  double compute_seconds(int rank, schedule::ActionKind kind, std::int32_t microbatch,
                         std::int32_t segment, std::int32_t vstage) const override;
  double transfer_seconds(int src_rank, int dst_rank, std::int64_t bytes) const override;

  // Per-pair links (a cluster's); by default a message uses its sender's device link.
  void set_links(LinkMatrix links) { links_ = std::move(links); }
  // Activation recomputation (Chen et al. arXiv 1604.06174; spec/recompute.h): B (or BW) first
  // rebuilds each recomputed layer, which costs that layer's forward without the K/V and output
  // projections (spec::ModelSpec::layer_recompute_flops); the head is not recomputed. Throws
  // plait::Error when a count exceeds its virtual stage's layers.
  void set_recompute(const spec::Recompute& recompute);
  // Tensor parallelism per rank (one entry: every rank); activation elements of `element_bytes`
  // (2 for bf16) in the collectives. Call after set_recompute's counts are known or before: both
  // retime the units. Degrees are checked by the caller (spec::check_tensor_parallel).
  void set_tensor_parallel(std::vector<RankTensorParallel> ranks, double element_bytes);
  int tensor_parallel(int rank) const;

  const UnitFlops& unit_flops(std::int32_t segment, std::int32_t vstage) const {
    return flops_[static_cast<std::size_t>(vstage) * segments_ + segment];
  }
  const DeviceProfile& device(int rank) const;

 private:
  int segments_;
  int hidden_;
  std::vector<int> vstage_layers_;
  std::vector<UnitFlops> flops_;        // [vstage][segment]
  std::vector<DeviceProfile> devices_;
  std::vector<double> seconds_;         // [device][vstage][segment][kind]
  std::vector<double> recompute_seconds_;  // [device][vstage][segment]
  void time_units();
  LinkMatrix links_;
  std::vector<RankTensorParallel> tp_;  // one per device slot (empty: t = 1)
  double tp_element_bytes_ = 2;
};

}  // namespace plait::sim
