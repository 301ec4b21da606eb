#include "plait/runtime/sharded_data_parallel.h"

#include <algorithm>
#include <set>

#include "plait/core/error.h"
#include "plait/model/tensor_shard_copy.h"
#include "plait/schedule/lazy_gathers.h"

namespace plait::runtime {

ShardedDataParallel::ShardedDataParallel(const PipelinePlan& plan, int rank, comm::Communicator& world,
                                         std::vector<model::StageModel*> chunks, const optim::AdamWConfig& adam,
                                         std::size_t bucket_floats, MemoryTracker& buffers, MemoryTracker* host,
                                         CopyEngine* copies) {
  const int V = plan.num_vstages();
  const bool split = plan.tied_table_split();
  // The job ranks of `ranks` (schedule ranks) at TP rank i (under TP a stage's data parallelism
  // runs between the holders' TP ranks of the same index, which hold the same part of it).
  const auto at_tp_rank = [&](const std::vector<int>& ranks, int i) {
    std::vector<int> job;
    for (int r : ranks) job.push_back(plan.job_rank(r, i));
    return job;
  };
  const int tp_rank = world.rank() - plan.first_job_rank(rank);
  // The same list on every rank: per virtual stage held by several ranks, one group per TP rank
  // of its degree (all its holders have that degree), then the tied embedding's holders (first
  // and last stage together).
  std::vector<std::vector<int>> lists;
  std::vector<int> stage_list(static_cast<std::size_t>(V), -1);  // the list of its TP rank 0
  for (int v = 0; v < V; ++v) {
    const std::vector<int> holders = plan.holders(v);
    if (holders.size() > 1) {
      stage_list[static_cast<std::size_t>(v)] = static_cast<int>(lists.size());
      for (int i = 0; i < plan.vstage_specs[static_cast<std::size_t>(v)].tensor_parallel; ++i) {
        lists.push_back(at_tp_rank(holders, i));
      }
    }
  }
  int tied_list = -1;
  if (split) {
    std::set<int> copies_of_wte;
    for (int v : {0, V - 1}) {
      for (int r : plan.holders(v)) copies_of_wte.insert(r);
    }
    const std::vector<int> copies(copies_of_wte.begin(), copies_of_wte.end());
    const int first_t = plan.vstage_specs.front().tensor_parallel, last_t = plan.vstage_specs.back().tensor_parallel;
    if (first_t != last_t) {
      // The embedding's and the head's copies are split over TP groups of different degrees, so
      // their vocabulary parts differ (and so does the padding, 128 t): the copies meet as whole
      // tables over every job rank of every holder, each rank's rows in place and zeros elsewhere
      // (tied_whole_).
      tied_whole_ = true;
      tied_list = static_cast<int>(lists.size());
      std::vector<int>& all = lists.emplace_back();
      for (int r : copies) {
        for (int i = 0; i < plan.tensor_parallel(r); ++i) all.push_back(plan.job_rank(r, i));
      }
    } else if (copies.size() > 1) {
      tied_list = static_cast<int>(lists.size());
      for (int i = 0; i < first_t; ++i) lists.push_back(at_tp_rank(copies, i));
    }
  }
  if (!lists.empty()) groups_ = world.create_groups(lists);

  const auto& stages = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)];
  bool holds_wte = false;
  std::size_t tied_elements = 0;  // the rank's copy of the table (its vocabulary part under TP)
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    model::StageModel& m = *chunks[c];
    const int v = stages[c];
    ChunkSharding s;
    s.grad_reduce = plan.grad_reduce;
    s.policy = plan.vstage_shard.empty() ? spec::ShardPolicy{} : plan.vstage_shard[static_cast<std::size_t>(v)];
    const int list = stage_list[static_cast<std::size_t>(v)];
    s.group = list >= 0 ? groups_[static_cast<std::size_t>(list + tp_rank)].get() : nullptr;
    const std::vector<int> holders = plan.holders(v);
    s.index = static_cast<int>(std::find(holders.begin(), holders.end(), rank) - holders.begin());
    const std::size_t elements = m.parameters().size();
    if (s.policy.level > 0) s.bounds = plan.shard_bounds(v, static_cast<std::int64_t>(elements));
    if (split && (m.spec().has_embedding || m.spec().has_head)) {
      const model::NamedTensor& wte = model::find_tensor(m.tensors(), model::embedding_tensor_name(plan.model));
      s.tied_offset = wte.offset;
      s.tied_count = wte.numel;
      s.counts_tied = m.spec().has_embedding;
      if (!s.counts_tied) s.norm_excluded.emplace_back(wte.offset, wte.numel);
      holds_wte = true;
      tied_elements = wte.numel;
      tied_tensor_ = wte;
    }
    for (std::size_t i = 0; i < m.tensors().size(); ++i) {
      if (!m.counts_in_norm(i)) s.norm_excluded.emplace_back(m.tensors()[i].offset, m.tensors()[i].numel);
    }
    std::sort(s.norm_excluded.begin(), s.norm_excluded.end());
    chunks_.push_back(std::make_unique<ShardedChunk>(m, std::move(s), adam, bucket_floats, host, copies, &buffers));
    if (chunks_.back()->sharding().group != nullptr) {
      buckets_per_step_ += (elements - chunks_.back()->sharding().tied_count + bucket_floats - 1) / bucket_floats;
    }
  }
  if (holds_wte) {
    tied_group_ = tied_list >= 0 ? groups_[static_cast<std::size_t>(tied_list + (tied_whole_ ? 0 : tp_rank))].get()
                                 : nullptr;
    // The sum goes on the wire in the reduction's type (a rank holding every copy sums in fp32;
    // whole tables across TP degrees go in fp32 too).
    if (tied_whole_) {
      tied_table_ = FloatBuffer(buffers, MemoryCategory::kCommBuffers, tied_tensor_.full_numel());
    }
    if (!tied_whole_ && tied_group_ != nullptr &&
        spec::dp_gradient_dtype(plan.precision, plan.grad_reduce) == DType::bf16) {
      tied_wire_ = Buffer<bf16>(buffers, MemoryCategory::kCommBuffers, tied_elements, chunks.front()->backend());
    } else {
      tied_sum_ = FloatBuffer(buffers, MemoryCategory::kCommBuffers, tied_elements);
    }
    if (tied_group_ != nullptr) ++buckets_per_step_;
  }
}

ShardedDataParallel::~ShardedDataParallel() = default;

void ShardedDataParallel::begin_step(double lr, bool early_update) {
  for (auto& c : chunks_) c->begin_step(lr, early_update);
  tied_started_ = false;
  tied_done_ = false;
}

void ShardedDataParallel::prefetch(int c) { chunk(c).start_gather(); }

void ShardedDataParallel::before_compute(const ComputeStep& s) {
  ShardedChunk& c = chunk(s.action.chunk);
  if (s.first_use) c.wait_gathered();
  if (s.first_weight) c.commit_gradients();
}

void ShardedDataParallel::after_compute(const ComputeStep& s) {
  ShardedChunk& c = chunk(s.action.chunk);
  if (s.last_use) c.release_parameters();
  if (s.finishes_chunk) start_chunk(s.action.chunk);
}

void ShardedDataParallel::start_chunk(int c) {
  ShardedChunk& chunk_c = chunk(c);
  if (chunk_c.reduction_started()) return;
  // The norms' partial gradients summed over the TP group first (a no-op without TP): every rank
  // of the group runs the same chunks' last W in the same order, so they meet here alike.
  chunk_c.model().reduce_tensor_parallel_gradients();
  chunk_c.start_reduction();
  // The tied embedding goes once every local copy is final.
  if (!tied_started_ && (!tied_sum_.empty() || !tied_wire_.empty())) {
    const bool all_final = std::all_of(chunks_.begin(), chunks_.end(), [](const auto& k) {
      return k->sharding().tied_count == 0 || k->reduction_started();
    });
    if (all_final) start_tied();
  }
}

void ShardedDataParallel::start_tied() {
  tied_started_ = true;
  if (!tied_wire_.empty()) {
    // bf16 wire: the local copies summed in fp32 into the first (every copy is overwritten by the
    // reduced sum later), rounded once into the wire buffer.
    float* first_copy = nullptr;
    for (const auto& chunk_ptr : chunks_) {
      const ChunkSharding& s = chunk_ptr->sharding();
      if (s.tied_count == 0) continue;
      float* g = chunk_ptr->model().gradients().data() + s.tied_offset;
      if (first_copy == nullptr) {
        first_copy = g;
      } else {
        chunk_ptr->model().backend().accumulate(first_copy, g, s.tied_count);
      }
    }
    chunks_.front()->model().backend().convert(tied_wire_.data(), first_copy, tied_wire_.size());
    tied_request_ = tied_group_->iallreduce(tied_wire_.span(), comm::ReduceOp::kSum);
    poll();
    return;
  }
  bool first = true;
  for (const auto& chunk_ptr : chunks_) {
    const ChunkSharding& s = chunk_ptr->sharding();
    if (s.tied_count == 0) continue;
    const float* g = chunk_ptr->model().gradients().data() + s.tied_offset;
    kernels::Backend& backend = chunk_ptr->model().backend();
    if (first) {
      backend.copy(tied_sum_.data(), g, s.tied_count * sizeof(float), CopyKind::kDeviceToDevice);
      first = false;
    } else {
      backend.accumulate(tied_sum_.data(), g, s.tied_count);
    }
  }
  if (tied_whole_) {
    // This rank's rows of the whole table (its vocabulary part, padding dropped), zeros elsewhere.
    std::fill(tied_table_.data(), tied_table_.data() + tied_table_.size(), 0.0f);
    model::copy_shard_in(tied_table_.span(), tied_tensor_, tied_sum_.span());
    tied_request_ = tied_group_->iallreduce(tied_table_.span(), comm::ReduceOp::kSum);
  } else if (tied_group_ != nullptr) {
    tied_request_ = tied_group_->iallreduce(tied_sum_.span(), comm::ReduceOp::kSum);
  }
  poll();
}

void ShardedDataParallel::poll() {
  if (tied_started_ && !tied_done_ && (!tied_request_.active() || tied_request_.test())) {
    // Written back once per step: a chunk's reduction counts as done only after this.
    tied_done_ = true;
    if (tied_whole_) model::copy_shard_out(tied_table_.span(), tied_tensor_, tied_sum_.span());
    for (auto& c : chunks_) {
      const ChunkSharding& s = c->sharding();
      if (s.tied_count == 0) continue;
      float* g = c->model().gradients().data() + s.tied_offset;
      if (!tied_wire_.empty()) {
        c->model().backend().convert(g, tied_wire_.data(), s.tied_count);
      } else {
        c->model().backend().copy(g, tied_sum_.data(), s.tied_count * sizeof(float), CopyKind::kDeviceToDevice);
      }
      c->tied_written();
    }
  }
  for (auto& c : chunks_) c->poll();
}

void ShardedDataParallel::finish() {
  for (int c = 0; c < num_chunks(); ++c) start_chunk(c);
  if (tied_request_.active()) tied_request_.wait();
  poll();  // writes the tied sum back
  for (auto& c : chunks_) c->finish_reduction();
}

double ShardedDataParallel::owned_sum_of_squares() const {
  double sum = 0;
  for (const auto& c : chunks_) sum += c->sum_of_squares();
  return sum;
}

void ShardedDataParallel::update(double lr, double clip_factor) {
  for (auto& c : chunks_) c->start_update(lr, clip_factor);
  for (auto& c : chunks_) c->finish_update();
}

void ShardedDataParallel::skip_update() {
  for (auto& c : chunks_) c->skip_update();
}

bool lazy_gathers_deadlock_free(const PipelinePlan& plan, const schedule::LoweredSchedule& lowered) {
  std::vector<bool> gathered;
  for (int v = 0; v < plan.num_vstages(); ++v) {
    gathered.push_back(!plan.vstage_shard.empty() && plan.vstage_shard[static_cast<std::size_t>(v)].shards_parameters());
  }
  return schedule::lazy_gathers_deadlock_free(plan.schedule, lowered, gathered);
}

}  // namespace plait::runtime
