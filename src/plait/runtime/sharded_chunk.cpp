#include "plait/runtime/sharded_chunk.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "plait/core/error.h"
#include "plait/spec/precision_policy.h"

namespace plait::runtime {
namespace {

// The parameter ranges of [begin, end), relative to begin (AdamW over a shard).
std::vector<optim::ParamRange> shard_ranges(const std::vector<optim::ParamRange>& ranges, std::size_t begin,
                                            std::size_t end) {
  std::vector<optim::ParamRange> out;
  for (const optim::ParamRange& r : ranges) {
    const std::size_t a = std::max(r.offset, begin), b = std::min(r.offset + r.count, end);
    if (a < b) out.push_back({a - begin, b - a, r.weight_decay});
  }
  return out;
}

std::size_t overlap(std::size_t a0, std::size_t a1, std::size_t b0, std::size_t b1) {
  const std::size_t lo = std::max(a0, b0), hi = std::min(a1, b1);
  return hi > lo ? hi - lo : 0;
}

}  // namespace

ShardedChunk::ShardedChunk(model::StageModel& model, ChunkSharding sharding, const optim::AdamWConfig& adam,
                           std::size_t bucket_floats, MemoryTracker* host, CopyEngine* copies,
                           MemoryTracker* buffers)
    : model_(model),
      s_(std::move(sharding)),
      bf16_(spec::has_compute_copy(model.precision())),
      host_(host),
      copies_(copies),
      buffers_(buffers),
      bf16_wire_(s_.group != nullptr && spec::dp_gradient_dtype(model.precision(), s_.grad_reduce) == DType::bf16) {
  const std::size_t E = model_.parameters().size();
  const spec::ShardPolicy& p = s_.policy;
  if (p.offload && (host_ == nullptr || copies_ == nullptr)) {
    throw Error("an offloaded stage needs the rank's host memory tier and copy engine");
  }
  if (bf16_wire_ && buffers_ == nullptr) throw Error("a bf16 gradient reduction needs the rank's comm-buffer tracker");
  if (p.level > 0 && s_.group == nullptr) {
    throw Error("shard level " + std::to_string(p.level) + " needs a data-parallel group");
  }
  begin_ = p.level == 0 ? 0 : s_.bounds.at(static_cast<std::size_t>(s_.index));
  end_ = p.level == 0 ? static_cast<std::int64_t>(E) : s_.bounds.at(static_cast<std::size_t>(s_.index) + 1);
  if (p.level > 0 && (s_.bounds.size() != static_cast<std::size_t>(s_.group->size()) + 1 ||
                      s_.bounds.back() != static_cast<std::int64_t>(E))) {
    throw Error("shard bounds do not cover the stage's " + std::to_string(E) + " elements over its " +
                std::to_string(s_.group->size()) + " holders");
  }
  weight_buckets_ = make_buckets(0, E, bucket_floats);
  if (s_.tied_count > 0) {
    gradient_buckets_ = make_buckets(0, s_.tied_offset, bucket_floats);
    for (Bucket& b : make_buckets(s_.tied_offset + s_.tied_count, E, bucket_floats)) gradient_buckets_.push_back(std::move(b));
  } else {
    gradient_buckets_ = make_buckets(0, E, bucket_floats);
  }

  const auto b = static_cast<std::size_t>(begin_), e = static_cast<std::size_t>(end_);
  const std::vector<optim::ParamRange> ranges = shard_ranges(optim::param_ranges(model_.tensors()), b, e);
  if (p.offload) {
    // bf16: the master is optimizer state (spec::parameter_bytes), as on the device.
    master_ = FloatBuffer(*host_, bf16_ ? MemoryCategory::kOptimizerState : MemoryCategory::kParameters,
                          e - b);
    model_.backend().copy(master_.data(), model_.parameters().data() + b, (e - b) * sizeof(float),
                          CopyKind::kDeviceToHost);
    // The offloaded update runs on the host tier, where its weights and moments live.
    optimizer_ = std::make_unique<optim::AdamW>(master_.span(), ranges, adam, *host_, kernels::cpu_backend());
  } else {
    optimizer_ = std::make_unique<optim::AdamW>(model_.parameters().subspan(b, e - b), ranges, adam, model_.tracker(),
                                                model_.backend());
  }
  if (bf16_) {
    // The fp32 master: on the host when offloaded, else the rank's shard (all of it at level
    // 0); the bf16 copy the kernels read: all of it, or at level 3 the shard between uses.
    if (p.offload) {
      model_.parameter_storage().decommit();
    } else if (p.shards_optimizer()) {
      model_.parameter_storage().retain(b, e - b);
    }
    if (p.shards_parameters()) {
      if (p.offload) {
        model_.compute_weight_storage().decommit();
      } else {
        model_.compute_weight_storage().retain(b, e - b);
      }
    }
  } else if (p.shards_parameters()) {
    if (p.offload) {
      model_.parameter_storage().decommit();
    } else {
      model_.parameter_storage().retain(b, e - b);
    }
  }
  if (p.shards_gradients()) model_.gradient_storage().decommit();
}

bool ShardedChunk::master_sharded() const {
  return s_.policy.offload || s_.policy.shards_parameters() || (bf16_ && s_.policy.shards_optimizer());
}

void ShardedChunk::refresh_copy_shard() {
  if (!bf16_) return;
  const auto b = static_cast<std::size_t>(begin_), n = static_cast<std::size_t>(end_ - begin_);
  if (!s_.policy.offload) {
    model_.refresh_compute_weights(b, n);
  } else if (!s_.policy.shards_parameters()) {
    // The host master rounded into the device copy. On the CPU backend the device's memory is
    // the host's, so the backend converts in place; a GPU backend would upload the master
    // shard first (the copy engine) and round it there.
    model_.backend().convert(model_.compute_weight_storage().data() + b, master_.data(), n);
  }
  // Offloaded at level 3: the copy is not resident; the next gather rounds the host master.
}

void ShardedChunk::gather_compute_weights(std::vector<comm::Request>& into) {
  for (const Bucket& bk : weight_buckets_) {
    if (bf16_) {
      bf16* w = model_.compute_weight_storage().data();
      into.push_back(s_.group->iallgather(std::span<bf16>(w + bk.begin, bk.end - bk.begin), bk.counts));
    } else {
      float* w = model_.parameters().data();
      into.push_back(s_.group->iallgather(std::span<float>(w + bk.begin, bk.end - bk.begin), bk.counts));
    }
  }
}

ShardedChunk::~ShardedChunk() = default;

std::vector<ShardedChunk::Bucket> ShardedChunk::make_buckets(std::size_t begin, std::size_t end,
                                                             std::size_t bucket_floats) const {
  std::vector<Bucket> buckets;
  for (std::size_t a = begin; a < end; a += bucket_floats) {
    Bucket bucket{a, std::min(end, a + bucket_floats), {}};
    if (s_.policy.level > 0) {
      for (std::size_t i = 0; i + 1 < s_.bounds.size(); ++i) {
        bucket.counts.push_back(overlap(bucket.begin, bucket.end, static_cast<std::size_t>(s_.bounds[i]),
                                        static_cast<std::size_t>(s_.bounds[i + 1])));
      }
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

std::vector<std::size_t> ShardedChunk::block_counts() const {
  std::vector<std::size_t> counts;
  for (std::size_t i = 0; i + 1 < s_.bounds.size(); ++i) {
    counts.push_back(static_cast<std::size_t>(s_.bounds[i + 1] - s_.bounds[i]));
  }
  return counts;
}

void ShardedChunk::begin_step(double lr, bool early_update) {
  lr_ = lr;
  early_update_ = early_update && s_.policy.level == 3;
  reduction_started_ = false;
  tied_done_ = s_.tied_count == 0;
  reduced_ = false;
  staged_ok_ = false;
  updated_ = false;
}

void ShardedChunk::start_gather() {
  if (!s_.policy.shards_parameters() || gathered_ || gather_collective_started_) return;
  if (bf16_) {
    model_.compute_weight_storage().commit();
    if (s_.policy.offload) {
      // The parked master shard rounded into the copy's shard (CPU: device memory is host
      // memory; refresh_copy_shard says what a GPU needs).
      model_.backend().convert(model_.compute_weight_storage().data() + begin_, master_.data(),
                               master_.size());
    }
    start_weight_gather();
    return;
  }
  model_.parameter_storage().commit();
  if (s_.policy.offload) {
    // The parked shard comes in from the host first. The collective must start here, where
    // every holder (and the deadlock check, lazy_gathers_deadlock_free) counts on it: a holder
    // blocked on a pipeline message polls nothing, so a start deferred to its next poll could
    // leave the others waiting for it in a cycle. So the copy is waited for now.
    copies_->wait(copies_->submit(model_.parameters().data() + begin_, master_.data(),
                                  master_.size() * sizeof(float)));
  }
  start_weight_gather();
}

void ShardedChunk::start_weight_gather() {
  gather_collective_started_ = true;
  gather_compute_weights(gather_);
}

void ShardedChunk::wait_gathered() {
  if (!s_.policy.shards_parameters() || gathered_) return;
  start_gather();
  comm::wait_all(gather_);
  gather_.clear();
  gathered_ = true;
  gather_collective_started_ = false;
}

void ShardedChunk::release_parameters() {
  if (!s_.policy.shards_parameters()) return;
  wait_gathered();  // a chunk is gathered before its first use; this only guards the order
  if (bf16_) {
    if (s_.policy.offload) {
      model_.compute_weight_storage().decommit();
    } else {
      model_.compute_weight_storage().retain(static_cast<std::size_t>(begin_),
                                             static_cast<std::size_t>(end_ - begin_));
    }
  } else if (s_.policy.offload) {
    model_.parameter_storage().decommit();  // the host master is the shard
  } else {
    model_.parameter_storage().retain(static_cast<std::size_t>(begin_), static_cast<std::size_t>(end_ - begin_));
  }
  gathered_ = false;
}

void ShardedChunk::commit_gradients() {
  if (s_.policy.shards_gradients()) model_.gradient_storage().commit();
}

void ShardedChunk::start_reduction() {
  if (reduction_started_) return;
  reduction_started_ = true;
  if (s_.group != nullptr) {
    float* g = model_.gradients().data();
    if (bf16_wire_) {
      // Beside the gradients, in the backend's memory (a device buffer NCCL reduces on a GPU).
      wire_ = Buffer<bf16>(*buffers_, MemoryCategory::kCommBuffers, model_.parameters().size() - s_.tied_count,
                           model_.backend());
    }
    for (const Bucket& b : gradient_buckets_) {
      const std::size_t n = b.end - b.begin;
      if (bf16_wire_) {
        // Rounded for the wire (one bf16 rounding of this rank's gradient), reduced in the copy.
        const std::span<bf16> data(wire_.data() + wire_index(b.begin), n);
        model_.backend().convert(data.data(), g + b.begin, n);
        reduction_.push_back(s_.policy.level == 0 ? s_.group->iallreduce(data, comm::ReduceOp::kSum)
                                                  : s_.group->ireduce_scatter(data, b.counts, comm::ReduceOp::kSum));
        continue;
      }
      const std::span<float> data(g + b.begin, n);
      reduction_.push_back(s_.policy.level == 0 ? s_.group->iallreduce(data, comm::ReduceOp::kSum)
                                                : s_.group->ireduce_scatter(data, b.counts, comm::ReduceOp::kSum));
    }
  }
  poll();
}

void ShardedChunk::tied_written() {
  tied_done_ = true;
  poll();
}

void ShardedChunk::poll() {
  if (!gather_.empty() && comm::test_all(gather_)) {
    gather_.clear();
    gathered_ = true;
    gather_collective_started_ = false;
  }
  if (reduction_started_ && !reduced_ && tied_done_ && comm::test_all(reduction_)) {
    reduction_.clear();
    on_reduced();
  }
  if (stage_copy_ && copies_->ready(*stage_copy_)) on_staged();
}

void ShardedChunk::widen_reduced() {
  float* g = model_.gradients().data();
  const auto b = static_cast<std::size_t>(begin_), e = static_cast<std::size_t>(end_);
  for (const Bucket& bucket : gradient_buckets_) {
    // The bucket's part this rank holds reduced: all of it at level 0, its block above.
    const std::size_t lo = std::max(bucket.begin, b), hi = std::min(bucket.end, e);
    if (lo < hi) model_.backend().convert(g + lo, wire_.data() + wire_index(lo), hi - lo);
  }
  wire_ = Buffer<bf16>();
}

void ShardedChunk::on_reduced() {
  if (bf16_wire_) widen_reduced();
  reduced_ = true;
  const auto b = static_cast<std::size_t>(begin_), n = static_cast<std::size_t>(end_ - begin_);
  if (s_.policy.offload) {
    // To the host, overlapping the rest of the backward; the device copy goes once it is there.
    staged_ = FloatBuffer(*host_, MemoryCategory::kGradients, n);
    stage_copy_ = copies_->submit(staged_.data(), model_.gradients().data() + b, n * sizeof(float));
    return;
  }
  if (s_.policy.shards_gradients()) model_.gradient_storage().retain(b, n);
  if (early_update_) {
    run_optimizer(lr_, 1.0);
    updated_ = true;
  }
}

void ShardedChunk::on_staged() {
  stage_copy_.reset();
  staged_ok_ = true;
  if (s_.policy.shards_gradients()) model_.gradient_storage().decommit();
  if (early_update_) {
    run_optimizer(lr_, 1.0);
    updated_ = true;
  }
}

void ShardedChunk::finish_reduction() {
  start_reduction();
  if (!tied_done_) throw Error("the tied embedding's gradient was not written back before the reduction finished");
  comm::wait_all(reduction_);
  reduction_.clear();
  if (!reduced_) on_reduced();
  if (stage_copy_) {
    copies_->wait(*stage_copy_);
    on_staged();
  }
}

std::span<const float> ShardedChunk::reduced_gradients() const {
  if (s_.policy.offload) return staged_.span();
  return std::span<const float>(model_.gradients()).subspan(static_cast<std::size_t>(begin_),
                                                           static_cast<std::size_t>(end_ - begin_));
}

double ShardedChunk::sum_of_squares() const {
  // Level 0: every holder has the whole sum; the stage's lowest holder counts it.
  if (s_.policy.level == 0 && s_.index != 0) return 0;
  const std::span<const float> g = reduced_gradients();
  const auto b = static_cast<std::size_t>(begin_), e = static_cast<std::size_t>(end_);
  kernels::Backend& backend = model_.backend();
  if (s_.norm_excluded.empty()) return backend.sum_of_squares(g.data(), g.size());
  // The runs of [b, e) between the excluded ranges.
  double sum = 0;
  std::size_t from = b;
  for (const auto& [offset, count] : s_.norm_excluded) {
    const std::size_t x0 = std::clamp(offset, b, e), x1 = std::clamp(offset + count, b, e);
    if (x0 > from) sum += backend.sum_of_squares(g.data() + (from - b), x0 - from);
    from = std::max(from, x1);
  }
  return sum + backend.sum_of_squares(g.data() + (from - b), e - from);
}

std::optional<std::size_t> ShardedChunk::first_nonfinite(int& kind) const {
  const std::span<const float> g = reduced_gradients();
  const auto& tensors = model_.tensors();
  const auto b = static_cast<std::size_t>(begin_), e = static_cast<std::size_t>(end_);
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::size_t lo = std::max(tensors[t].offset, b), hi = std::min(tensors[t].offset + tensors[t].numel, e);
    for (std::size_t i = lo; i < hi; ++i) {
      const float v = g[i - b];
      if (!std::isfinite(v)) {
        kind = std::isnan(v) ? 1 : 2;
        return t;
      }
    }
  }
  return std::nullopt;
}

void ShardedChunk::run_optimizer(double lr, double clip_factor) {
  optimizer_->step(reduced_gradients(), lr, clip_factor);
  refresh_copy_shard();
}

void ShardedChunk::start_update(double lr, double clip_factor) {
  if (!updated_) {
    run_optimizer(lr, clip_factor);
    updated_ = true;
  }
  if (s_.policy.shards_parameters()) return;  // the next gather reads the updated shard
  if (s_.policy.offload && !bf16_) {
    const CopyEvent back = copies_->submit(model_.parameters().data() + begin_, master_.data(),
                                           master_.size() * sizeof(float));
    copies_->wait(back);
  }
  if (s_.policy.level == 0) return;  // every holder updated every element
  // bf16: the updated shards of the compute copy (2 bytes per element on the wire); the fp32
  // master stays sharded.
  gather_compute_weights(weight_gather_);
}

void ShardedChunk::finish_update() {
  comm::wait_all(weight_gather_);
  weight_gather_.clear();
  skip_update();
}

void ShardedChunk::skip_update() {
  if (s_.policy.shards_gradients()) model_.gradient_storage().decommit();
  staged_ = FloatBuffer();
}

std::span<float> ShardedChunk::shard_parameters() {
  if (s_.policy.offload) return master_.span();
  return model_.parameters().subspan(static_cast<std::size_t>(begin_), static_cast<std::size_t>(end_ - begin_));
}

}  // namespace plait::runtime
