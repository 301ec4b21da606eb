#include "plait/runtime/gradient_reducer.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "plait/kernels/grad_norm.h"

namespace plait::runtime {

GradientReducer::GradientReducer(const PipelinePlan& plan, int rank, comm::Communicator& world,
                                 std::vector<model::StageModel*> chunks, std::size_t bucket_floats,
                                 MemoryTracker& buffers) {
  const int V = plan.num_vstages();
  const bool split = plan.tied_table_split();
  // The same list on every rank: one group per virtual stage held by several ranks, then the
  // tied embedding's holders (first and last stage together).
  std::vector<std::vector<int>> lists;
  std::vector<int> stage_list(static_cast<std::size_t>(V), -1);
  for (int v = 0; v < V; ++v) {
    const std::vector<int> holders = plan.holders(v);
    if (holders.size() > 1) {
      stage_list[static_cast<std::size_t>(v)] = static_cast<int>(lists.size());
      lists.push_back(holders);
    }
  }
  int tied_list = -1;
  if (split) {
    std::set<int> copies;
    for (int v : {0, V - 1}) {
      for (int r : plan.holders(v)) copies.insert(r);
    }
    if (copies.size() > 1) {
      tied_list = static_cast<int>(lists.size());
      lists.emplace_back(copies.begin(), copies.end());
    }
  }
  if (!lists.empty()) groups_ = world.create_groups(lists);

  const auto& stages = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)];
  bool holds_wte = false;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    Chunk chunk;
    chunk.model = chunks[c];
    chunk.vstage = stages[c];
    const int list = stage_list[static_cast<std::size_t>(chunk.vstage)];
    chunk.group = list >= 0 ? groups_[static_cast<std::size_t>(list)].get() : nullptr;
    chunk.owner = plan.holders(chunk.vstage).front() == rank;
    const model::StageSpec& spec = chunk.model->spec();
    if (split && (spec.has_embedding || spec.has_head)) {
      const model::NamedTensor& wte =
          model::find_tensor(chunk.model->tensors(), model::embedding_tensor_name(plan.model));
      chunk.wte_offset = wte.offset;
      chunk.wte_count = wte.numel;
      holds_wte = true;
    }
    // Buckets: the gradient buffer without the tied copy, in pieces of at most bucket_floats.
    const std::span<float> grads = chunk.model->gradients();
    auto add_range = [&](std::size_t begin, std::size_t end) {
      for (std::size_t b = begin; b < end; b += bucket_floats) {
        chunk.buckets.push_back(grads.subspan(b, std::min(bucket_floats, end - b)));
      }
    };
    if (chunk.group != nullptr) {
      if (chunk.wte_count > 0) {
        add_range(0, chunk.wte_offset);
        add_range(chunk.wte_offset + chunk.wte_count, grads.size());
      } else {
        add_range(0, grads.size());
      }
      buckets_per_step_ += chunk.buckets.size();
    }
    chunks_.push_back(std::move(chunk));
  }
  if (holds_wte) {
    tied_group_ = tied_list >= 0 ? groups_[static_cast<std::size_t>(tied_list)].get() : nullptr;
    tied_sum_ = FloatBuffer(buffers, MemoryCategory::kCommBuffers,
                            static_cast<std::size_t>(plan.model.vocab) * plan.model.hidden);
    if (tied_group_ != nullptr) ++buckets_per_step_;
  }
}

GradientReducer::~GradientReducer() = default;

void GradientReducer::start_chunk(int c) {
  Chunk& chunk = chunks_[static_cast<std::size_t>(c)];
  if (chunk.started) return;
  chunk.started = true;
  if (chunk.group != nullptr) {
    for (std::span<float> bucket : chunk.buckets) {
      in_flight_.push_back(chunk.group->iallreduce(bucket, comm::ReduceOp::kSum));
    }
  }
  // The tied embedding goes once every local copy is final.
  if (!tied_started_ && !tied_sum_.empty()) {
    const bool all_final = std::all_of(chunks_.begin(), chunks_.end(), [](const Chunk& k) {
      return k.wte_count == 0 || k.started;
    });
    if (all_final) start_tied();
  }
}

void GradientReducer::start_tied() {
  tied_started_ = true;
  bool first = true;
  for (const Chunk& chunk : chunks_) {
    if (chunk.wte_count == 0) continue;
    const float* g = chunk.model->gradients().data() + chunk.wte_offset;
    float* sum = tied_sum_.data();
    if (first) {
      std::memcpy(sum, g, chunk.wte_count * sizeof(float));
      first = false;
    } else {
      for (std::size_t i = 0; i < chunk.wte_count; ++i) sum[i] += g[i];
    }
  }
  if (tied_group_ != nullptr) {
    in_flight_.push_back(tied_group_->iallreduce(tied_sum_.span(), comm::ReduceOp::kSum));
  }
}

void GradientReducer::poll() {
  if (in_flight_.empty()) return;
  if (comm::test_all(in_flight_)) in_flight_.clear();
}

void GradientReducer::finish() {
  for (std::size_t c = 0; c < chunks_.size(); ++c) start_chunk(static_cast<int>(c));
  comm::wait_all(in_flight_);
  in_flight_.clear();
  if (!tied_sum_.empty()) {
    for (const Chunk& chunk : chunks_) {
      if (chunk.wte_count == 0) continue;
      std::memcpy(chunk.model->gradients().data() + chunk.wte_offset, tied_sum_.data(),
                  chunk.wte_count * sizeof(float));
    }
  }
  for (Chunk& chunk : chunks_) chunk.started = false;
  tied_started_ = false;
}

double GradientReducer::owned_sum_of_squares() const {
  double sum = 0;
  for (const Chunk& chunk : chunks_) {
    if (!chunk.owner) continue;
    const std::span<const float> g = chunk.model->gradients();
    // "wte" is counted through the embedding stage only.
    if (chunk.wte_count > 0 && !chunk.model->spec().has_embedding) {
      sum += kernels::sum_of_squares(g.data(), chunk.wte_offset);
      const std::size_t rest = chunk.wte_offset + chunk.wte_count;
      sum += kernels::sum_of_squares(g.data() + rest, g.size() - rest);
    } else {
      sum += kernels::sum_of_squares(g.data(), g.size());
    }
  }
  return sum;
}

}  // namespace plait::runtime
