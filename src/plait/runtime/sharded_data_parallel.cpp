#include "plait/runtime/sharded_data_parallel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "plait/core/error.h"
#include "plait/schedule/blocking_execution.h"
#include "plait/schedule/chunk_uses.h"

namespace plait::runtime {

ShardedDataParallel::ShardedDataParallel(const PipelinePlan& plan, int rank, comm::Communicator& world,
                                         std::vector<model::StageModel*> chunks, const optim::AdamWConfig& adam,
                                         std::size_t bucket_floats, MemoryTracker& buffers, MemoryTracker* host,
                                         CopyEngine* copies) {
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
    std::set<int> copies_of_wte;
    for (int v : {0, V - 1}) {
      for (int r : plan.holders(v)) copies_of_wte.insert(r);
    }
    if (copies_of_wte.size() > 1) {
      tied_list = static_cast<int>(lists.size());
      lists.emplace_back(copies_of_wte.begin(), copies_of_wte.end());
    }
  }
  if (!lists.empty()) groups_ = world.create_groups(lists);

  const auto& stages = plan.schedule.layout.rank_vstages[static_cast<std::size_t>(rank)];
  bool holds_wte = false;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    model::StageModel& m = *chunks[c];
    const int v = stages[c];
    ChunkSharding s;
    s.policy = plan.vstage_shard.empty() ? spec::ShardPolicy{} : plan.vstage_shard[static_cast<std::size_t>(v)];
    const int list = stage_list[static_cast<std::size_t>(v)];
    s.group = list >= 0 ? groups_[static_cast<std::size_t>(list)].get() : nullptr;
    const std::vector<int> holders = plan.holders(v);
    s.index = static_cast<int>(std::find(holders.begin(), holders.end(), rank) - holders.begin());
    const std::size_t elements = m.parameters().size();
    if (s.policy.level > 0) s.bounds = plan.shard_bounds(v, static_cast<std::int64_t>(elements));
    if (split && (m.spec().has_embedding || m.spec().has_head)) {
      const model::NamedTensor& wte = model::find_tensor(m.tensors(), model::embedding_tensor_name(plan.model));
      s.tied_offset = wte.offset;
      s.tied_count = wte.numel;
      s.counts_tied = m.spec().has_embedding;
      holds_wte = true;
    }
    chunks_.push_back(std::make_unique<ShardedChunk>(m, std::move(s), adam, bucket_floats, host, copies));
    if (chunks_.back()->sharding().group != nullptr) {
      buckets_per_step_ += (elements - chunks_.back()->sharding().tied_count + bucket_floats - 1) / bucket_floats;
    }
  }
  if (holds_wte) {
    tied_group_ = tied_list >= 0 ? groups_[static_cast<std::size_t>(tied_list)].get() : nullptr;
    tied_sum_ = FloatBuffer(buffers, MemoryCategory::kCommBuffers,
                            static_cast<std::size_t>(plan.model.vocab) * plan.model.hidden);
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
  chunk_c.start_reduction();
  // The tied embedding goes once every local copy is final.
  if (!tied_started_ && !tied_sum_.empty()) {
    const bool all_final = std::all_of(chunks_.begin(), chunks_.end(), [](const auto& k) {
      return k->sharding().tied_count == 0 || k->reduction_started();
    });
    if (all_final) start_tied();
  }
}

void ShardedDataParallel::start_tied() {
  tied_started_ = true;
  bool first = true;
  for (const auto& chunk_ptr : chunks_) {
    const ChunkSharding& s = chunk_ptr->sharding();
    if (s.tied_count == 0) continue;
    const float* g = chunk_ptr->model().gradients().data() + s.tied_offset;
    float* sum = tied_sum_.data();
    if (first) {
      std::memcpy(sum, g, s.tied_count * sizeof(float));
      first = false;
    } else {
      for (std::size_t i = 0; i < s.tied_count; ++i) sum[i] += g[i];
    }
  }
  if (tied_group_ != nullptr) tied_request_ = tied_group_->iallreduce(tied_sum_.span(), comm::ReduceOp::kSum);
  poll();
}

void ShardedDataParallel::poll() {
  if (tied_started_ && !tied_done_ && (!tied_request_.active() || tied_request_.test())) {
    // Written back once per step: a chunk's reduction counts as done only after this.
    tied_done_ = true;
    for (auto& c : chunks_) {
      const ChunkSharding& s = c->sharding();
      if (s.tied_count == 0) continue;
      std::memcpy(c->model().gradients().data() + s.tied_offset, tied_sum_.data(), s.tied_count * sizeof(float));
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
  const schedule::Layout& layout = plan.schedule.layout;
  const int ranks = plan.num_ranks();
  // Per rank: (action index, peer, stage) of the synthetic sends before an action and receives
  // before its compute.
  std::vector<std::vector<std::tuple<std::int32_t, int, int>>> sends(static_cast<std::size_t>(ranks)),
      receives(static_cast<std::size_t>(ranks));
  bool any = false;
  for (int v = 0; v < plan.num_vstages(); ++v) {
    if (plan.vstage_shard.empty() || !plan.vstage_shard[static_cast<std::size_t>(v)].shards_parameters()) continue;
    const std::vector<int> holders = plan.holders(v);
    std::vector<schedule::ChunkUses> uses;
    for (int r : holders) {
      const auto& stages = layout.rank_vstages[static_cast<std::size_t>(r)];
      const auto c = static_cast<std::int32_t>(std::find(stages.begin(), stages.end(), v) - stages.begin());
      uses.push_back(schedule::chunk_uses(plan.schedule.ranks[static_cast<std::size_t>(r)],
                                          layout.num_chunks(r))[static_cast<std::size_t>(c)]);
    }
    for (std::size_t a = 0; a < holders.size(); ++a) {
      for (std::size_t b = 0; b < holders.size(); ++b) {
        if (a == b || uses[a].first < 0 || uses[b].first < 0) continue;
        any = true;
        sends[static_cast<std::size_t>(holders[a])].push_back({uses[a].prefetch(), holders[b], v});
        receives[static_cast<std::size_t>(holders[b])].push_back({uses[b].first, holders[a], v});
      }
    }
  }
  if (!any) return true;

  schedule::LoweredSchedule augmented;
  augmented.num_segments = lowered.num_segments;
  augmented.num_vstages = lowered.num_vstages;
  augmented.messages = lowered.messages;
  augmented.programs.resize(static_cast<std::size_t>(ranks));
  // One synthetic message per (sender, receiver, stage): the sender's start of that stage's
  // gather to the receiver's wait for it.
  std::map<std::tuple<int, int, int>, std::int32_t> synthetic;
  auto message_for = [&](int src, int dst, int vstage) -> std::int32_t {
    auto [it, fresh] = synthetic.try_emplace({src, dst, vstage}, static_cast<std::int32_t>(augmented.messages.size()));
    if (fresh) {
      schedule::Message m{};
      m.src_rank = src;
      m.dst_rank = dst;
      m.tag = -1;
      augmented.messages.push_back(m);
    }
    return it->second;
  };
  for (int r = 0; r < ranks; ++r) {
    const auto& ops = lowered.programs[static_cast<std::size_t>(r)];
    auto& out = augmented.programs[static_cast<std::size_t>(r)];
    // The first op of each action's group (its receives, or the compute itself).
    std::int32_t group_start_action = -1;
    bool at_group_start = true;
    auto emit_sends = [&](std::int32_t action) {
      for (const auto& [a, peer, v] : sends[static_cast<std::size_t>(r)]) {
        if (a != action) continue;
        const std::int32_t id = message_for(r, peer, v);
        out.push_back({schedule::OpKind::send, id});
      }
    };
    std::int32_t next_action = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const schedule::Op op = ops[i];
      if (at_group_start && op.kind != schedule::OpKind::send) {
        // A new action's group begins here (its receives, then its compute).
        group_start_action = next_action;
        emit_sends(group_start_action);
        at_group_start = false;
      }
      if (op.kind == schedule::OpKind::compute) {
        for (const auto& [a, peer, v] : receives[static_cast<std::size_t>(r)]) {
          if (a != op.index) continue;
          const std::int32_t id = message_for(peer, r, v);
          out.push_back({schedule::OpKind::recv, id});
        }
        ++next_action;
        at_group_start = true;
      }
      out.push_back(op);
    }
  }
  // The executor never waits on a send (nonblocking, completed lazily) and a gather's start
  // never waits either, so every receive counts as posted from the start: only cycles of waits
  // for messages and gathers can hang, which is what execute_blocking then finds.
  for (schedule::Message& m : augmented.messages) m.post_op = 0;
  return schedule::execute_blocking(augmented).completed;
}

}  // namespace plait::runtime
