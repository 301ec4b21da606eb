#include "plait/runtime/layer_transfer.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"
#include "plait/runtime/training_checkpoint.h"

namespace plait::runtime {
namespace {

// A tensor's state on its way: parameters, then the first and the second moment.
using Held = std::vector<float>;

// The rank holding layer `layer` under `plan` (one stage per rank, layer_mover.h).
int holder_of_layer(const PipelinePlan& plan, int layer) {
  for (int v = 0; v < plan.num_vstages(); ++v) {
    const model::StageSpec& s = plan.vstage_specs[static_cast<std::size_t>(v)];
    if (layer >= s.first_layer && layer < s.last_layer) return plan.holders(v).at(0);
  }
  throw Error("layer move: layer " + std::to_string(layer) + " is on no stage");
}

std::map<std::string, Held> take_state(DistributedTrainer& trainer) {
  std::map<std::string, Held> held;
  for (int c = 0; c < trainer.num_chunks(); ++c) {
    ShardedChunk& chunk = trainer.data_parallel().chunk(c);
    optim::AdamW& opt = trainer.optimizer(c);
    if (chunk.shard_begin() != 0) throw Error("layer move: a sharded stage (tier b moves level-0 stages only)");
    const std::span<const float> spans[3] = {chunk.shard_parameters(), opt.first_moment(), opt.second_moment()};
    for (const model::NamedTensor& t : trainer.chunk(c).tensors()) {
      Held& h = held[t.name];
      h.resize(3 * t.numel);
      for (std::size_t k = 0; k < 3; ++k) {
        std::copy_n(spans[k].begin() + static_cast<std::ptrdiff_t>(t.offset), t.numel,
                    h.begin() + static_cast<std::ptrdiff_t>(k * t.numel));
      }
    }
  }
  return held;
}

void put_state(DistributedTrainer& trainer, int c, const model::NamedTensor& t, const Held& h) {
  const std::span<const float> all(h);
  load_chunk_parameter(trainer, c, t, all.subspan(0, t.numel));
  optim::AdamW& opt = trainer.optimizer(c);
  std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(t.numel), t.numel,
              opt.first_moment().begin() + static_cast<std::ptrdiff_t>(t.offset));
  std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(2 * t.numel), t.numel,
              opt.second_moment().begin() + static_cast<std::ptrdiff_t>(t.offset));
}

}  // namespace

std::pair<std::unique_ptr<DistributedTrainer>, LayerTransferTimes> move_layers(
    std::unique_ptr<DistributedTrainer> trainer, const PipelinePlan& next, const TrainConfig& train,
    comm::Communicator& world, MemoryTracker& tracker, const TrainerOptions& options) {
  const double start = monotonic_seconds();
  LayerTransferTimes times;
  const PipelinePlan before = trainer->plan();
  const int rank = trainer->rank();
  const int steps = trainer->optimizer_steps();
  const double slowdown = trainer->device_slowdown();
  const LinkEmulator link = trainer->link();
  note_progress("layer move: taking the stages' state out");
  std::map<std::string, Held> held = take_state(*trainer);
  trainer.reset();
  note_progress("layer move: building the trainer on the new partition");
  auto fresh = std::make_unique<DistributedTrainer>(next, train, world, tracker, options);
  fresh->set_optimizer_steps(steps);
  fresh->set_device_slowdown(slowdown);
  fresh->link() = link;

  // The moved layers' tensors, in layer then layout order: the same list on every rank.
  comm::Communicator& peers = *fresh->schedule_world();  // the job's world: layer moves run without TP
  struct Moving {
    std::string name;
    int from = 0, to = 0;
    std::size_t numel = 0;
  };
  std::vector<Moving> moving;
  for (int l = 0; l < next.model.layers; ++l) {
    const int from = holder_of_layer(before, l), to = holder_of_layer(next, l);
    if (from == to) continue;
    const model::StageSpec one{l, l + 1, false, false, 0, next.precision, 1};
    for (const model::NamedTensor& t : model::parameter_layout(next.model, one)) moving.push_back({t.name, from, to, t.numel});
  }
  if (static_cast<int>(moving.size()) >= peers.max_tag()) throw Error("layer move: more tensors than message tags");
  note_progress("layer move: sending and receiving the moved layers");
  const double sending = monotonic_seconds();
  std::vector<comm::Request> pending;
  std::map<std::string, Held> received;
  for (std::size_t i = 0; i < moving.size(); ++i) {
    const Moving& m = moving[i];
    if (m.from == rank) {
      const Held& h = held.at(m.name);
      fresh->link().delay(h.size() * sizeof(float));  // an injected slow link holds the sender
      pending.push_back(peers.isend(std::span<const float>(h), m.to, static_cast<int>(i)));
    } else if (m.to == rank) {
      Held& h = received[m.name];
      h.resize(3 * m.numel);
      pending.push_back(peers.irecv(std::span<float>(h), m.from, static_cast<int>(i)));
    }
  }
  for (comm::Request& r : pending) r.wait();
  times.transfer_seconds = monotonic_seconds() - sending;
  for (auto& [name, h] : received) held[name] = std::move(h);

  for (int c = 0; c < fresh->num_chunks(); ++c) {
    for (const model::NamedTensor& t : fresh->chunk(c).tensors()) {
      const auto it = held.find(t.name);
      if (it == held.end() || it->second.size() != 3 * t.numel) {
        throw Error("layer move: rank " + std::to_string(rank) + " has no state for \"" + t.name + "\"");
      }
      put_state(*fresh, c, t, it->second);
    }
  }
  // Every rank has its state before the next step starts using it (the step's own barrier would
  // do; this one makes the move's measured time the slowest rank's).
  world.barrier();
  times.seconds = monotonic_seconds() - start;
  return {std::move(fresh), times};
}

LinkProbe probe_link(DistributedTrainer& trainer, int from, int to) {
  comm::Communicator& peers = *trainer.schedule_world();  // the job's world: layer moves run without TP
  LinkProbe probe;
  const int rank = trainer.rank();
  double seconds[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const std::size_t bytes = k == 0 ? probe.small_bytes : probe.large_bytes;
    std::vector<float> message(bytes / sizeof(float), 0.0f), answer(1, 0.0f);
    if (rank == from) {
      const double t0 = monotonic_seconds();
      trainer.link().delay(bytes);
      comm::Request s = peers.isend(std::span<const float>(message), to, 1);
      comm::Request a = peers.irecv(std::span<float>(answer), to, 2);
      s.wait();
      a.wait();
      seconds[k] = monotonic_seconds() - t0;  // the round trip
    } else if (rank == to) {
      peers.irecv(std::span<float>(message), from, 1).wait();
      peers.isend(std::span<const float>(answer), from, 2).wait();
    }
  }
  // Every rank gets the sender's times (the others add zeros).
  peers.allreduce(std::span<double>(seconds, 2), comm::ReduceOp::kSum);
  // One-way times: the small message half its round trip; the large one its round trip less the
  // small answer's half (a link fault emulated on the sender's side only, or an asymmetric link,
  // is not halved away).
  probe.small_seconds = seconds[0] / 2;
  probe.large_seconds = seconds[1] - seconds[0] / 2;
  return probe;
}

}  // namespace plait::runtime
