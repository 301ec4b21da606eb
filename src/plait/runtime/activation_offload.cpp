#include "plait/runtime/activation_offload.h"

#include <string>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"

namespace plait::runtime {

// A unit's buffers while they move: the device slots (inside the stage model's unit state), their
// host copies and the event of the latest copy either way.
struct ActivationOffload::Moving {
  std::vector<model::PooledBuffer*> slots;
  std::vector<model::PooledBuffer> host;
  CopyEvent event;
  bool away = false;  // the device bytes are freed (between release and prefetch)
};

ActivationOffload::ActivationOffload(const RankProgram& program, std::vector<model::StageModel*> chunks,
                                     const std::vector<bool>& chunk_offloads, int segments, MemoryTracker& host,
                                     CopyEngine& copies)
    : chunks_(std::move(chunks)), segments_(segments), copies_(copies), host_pool_(host) {
  std::vector<schedule::Action> actions;
  for (const ComputeStep& s : program.steps) actions.push_back(s.action);
  units_ = schedule::activation_offloads(actions, chunk_offloads);
  points_ = schedule::offload_points(units_, actions.size());
  moving_.resize(units_.size());
}

ActivationOffload::~ActivationOffload() { copies_.synchronize(); }

void ActivationOffload::wait(CopyEvent event) {
  if (copies_.ready(event)) return;
  const double from = monotonic_seconds();
  copies_.wait(event);
  wait_seconds_ += monotonic_seconds() - from;
}

void ActivationOffload::after(std::size_t i) {
  const std::int32_t u = points_.after_forward[i];
  if (u < 0) return;
  const schedule::UnitOffload& x = units_[static_cast<std::size_t>(u)];
  Moving& m = moving_[static_cast<std::size_t>(u)];
  m.slots = chunks_[static_cast<std::size_t>(x.chunk)]->saved_activations(x.microbatch, x.segment,
                                                                          x.segment == segments_ - 1);
  m.host.clear();
  for (model::PooledBuffer* b : m.slots) {
    model::PooledBuffer& h = m.host.emplace_back(host_pool_.acquire(b->category(), b->size(), b->dtype()));
    m.event = copies_.submit(h.as<void>(), b->as<void>(), b->bytes());
    bytes_out_ += static_cast<double>(b->bytes());
  }
}

void ActivationOffload::before(std::size_t i) {
  for (std::int32_t u : points_.release[i]) {
    Moving& m = moving_[static_cast<std::size_t>(u)];
    wait(m.event);
    for (model::PooledBuffer* b : m.slots) b->reset();
    m.away = true;
  }
  for (std::int32_t u : points_.prefetch[i]) {
    const schedule::UnitOffload& x = units_[static_cast<std::size_t>(u)];
    Moving& m = moving_[static_cast<std::size_t>(u)];
    model::TensorPool& pool = chunks_[static_cast<std::size_t>(x.chunk)]->pool();
    for (std::size_t k = 0; k < m.slots.size(); ++k) {
      const model::PooledBuffer& h = m.host[k];
      *m.slots[k] = pool.acquire(h.category(), h.size(), h.dtype());
      m.event = copies_.submit(m.slots[k]->as<void>(), h.as<void>(), h.bytes());
    }
    m.away = false;
  }
  if (const std::int32_t u = points_.before_backward[i]; u >= 0) {
    Moving& m = moving_[static_cast<std::size_t>(u)];
    wait(m.event);
    m.host.clear();
    m.slots.clear();
  }
}

}  // namespace plait::runtime
