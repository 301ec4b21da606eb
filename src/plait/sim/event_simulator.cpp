#include "plait/sim/event_simulator.h"

#include <algorithm>
#include <memory>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/activation_offload.h"

namespace plait::sim {

using schedule::ActionKind;
using schedule::OpKind;

namespace {

// The levels of a rank's activations and K/V categories as the engine moves them
// (model/stage_model.h; the transitions are spec/unit_memory.h's fields), with their peaks.
struct AllocatedLevels {
  double activations = 0, kv = 0;

  // Returns the two categories' peak together inside the action (what it adds to the static
  // memory at its peak: sharded_memory.h's replay).
  double peak_inside(AllocatedPeaks& p, double activations_peak, double kv_peak, double total_peak) const {
    p.activations = std::max(p.activations, activations + activations_peak);
    p.kv_cache = std::max(p.kv_cache, kv + kv_peak);
    p.total = std::max(p.total, activations + kv + total_peak);
    return activations + kv + total_peak;
  }

  double run(AllocatedPeaks& p, const MemoryModel& memory, ActionKind kind, std::int32_t vstage,
             std::int32_t segment) {
    const spec::UnitMemory& u = memory.unit_memory(vstage, segment);
    const auto bytes = [](std::size_t b) { return static_cast<double>(b); };
    if (kind == ActionKind::F) {
      const double held = peak_inside(p, bytes(u.forward_peak_activations), bytes(u.forward_kv), bytes(u.forward_peak));
      activations += bytes(u.forward_activations);
      kv += bytes(u.forward_kv);
      return held;
    }
    if (kind == ActionKind::W) {
      const double held = activations + kv;  // W only releases
      activations -= bytes(u.activations_after_b());
      kv -= bytes(u.dkv_kept);
      return held;
    }
    // A micro-batch's first backward (its last segment's) allocates every unit's dK/dV.
    if (segment == memory.num_segments() - 1) kv += memory.microbatch_dkv_bytes(vstage);
    const bool fused = kind == ActionKind::BW;
    const double held = peak_inside(p, bytes(fused ? u.fused_peak_activations : u.backward_peak_activations),
                                    bytes(fused ? u.fused_peak_kv : u.backward_peak_kv),
                                    bytes(fused ? u.fused_peak : u.backward_peak));
    if (fused) {
      activations -= bytes(u.forward_activations);
      kv -= bytes(u.forward_kv + u.dkv);
    } else {
      activations += bytes(u.backward_kept) - bytes(u.backward_freed);
      kv += bytes(u.dkv_kept) - bytes(u.dkv) - bytes(u.forward_kv);
    }
    return held;
  }
};

// One rank's activation offload as the simulator replays it: the table, each unit's bytes
// (activations; K/V, moved for a micro-batch's last segment only) and copy completions, the copy
// engine's free time and the host tier's levels and peaks.
struct OffloadReplay {
  std::vector<schedule::UnitOffload> units;
  schedule::OffloadPoints points;
  std::vector<double> activations, kv, out_done, back_done;
  double seconds_per_byte = 0, copy_free = 0;
  // CPU ranks: compute seconds per copied byte, and what the copies submitted since the rank's
  // last compute action charge to its next one (ActivationOffloadModel::compute_seconds_per_byte).
  double compute_seconds_per_byte = 0, compute_due = 0;
  double host_activations = 0, host_kv = 0, peak_activations = 0, peak_kv = 0;

  bool empty() const { return units.empty(); }
  double bytes(std::int32_t u) const { return activations[static_cast<std::size_t>(u)] + kv[static_cast<std::size_t>(u)]; }
  double copy(double from, double b) {
    copy_free = std::max(from, copy_free) + b * seconds_per_byte;
    compute_due += b * compute_seconds_per_byte;
    return copy_free;
  }
  // The unit's bytes leave the device (sign -1) or come back (+1).
  void move(AllocatedLevels& device, double& held, std::int32_t u, double sign) const {
    device.activations += sign * activations[static_cast<std::size_t>(u)];
    device.kv += sign * kv[static_cast<std::size_t>(u)];
    held += sign * bytes(u);
  }
};

}  // namespace

SimResult simulate(const schedule::Schedule& schedule, const schedule::LoweredSchedule& lowered,
                   const CostModel& cost, const MemoryModel* memory, const SimOptions& options) {
  const schedule::Layout& layout = schedule.layout;
  const int ranks = schedule.num_ranks();
  const std::int32_t k = layout.num_segments;
  SimResult result;
  result.ranks.resize(ranks);
  std::vector<double> now(ranks, 0.0), port_free(ranks, 0.0), activation(ranks, 0.0),
      in_flight(ranks, 0.0);
  std::vector<AllocatedLevels> allocated(ranks);
  std::unique_ptr<CollectiveGates> gates;
  if (options.data_parallel) gates = std::make_unique<CollectiveGates>(schedule, lowered, *options.data_parallel, cost);
  std::unique_ptr<StaticReplay> replay;
  if (memory && options.chunk_states) replay = std::make_unique<StaticReplay>(schedule, lowered, *options.chunk_states);
  std::vector<std::int32_t> pc(ranks, 0), waiting(ranks, -1);
  // With overlap_pairs: the start of the rank's last compute if it was an F (else -1), its chunk,
  // and the latest input that arrived since (a pair's backward waits for that, not for the F).
  std::vector<double> forward_start(ranks, -1.0), arrived_since(ranks, 0.0);
  std::vector<std::int32_t> forward_chunk(ranks, -1);
  std::vector<double> arrival(lowered.messages.size(), -1.0);
  std::vector<OffloadReplay> offload(static_cast<std::size_t>(ranks));
  if (options.activation_offload && memory) {
    const ActivationOffloadModel& model = *options.activation_offload;
    for (int r = 0; r < ranks; ++r) {
      if (static_cast<std::size_t>(r) >= model.chunk_offloads.size()) break;
      OffloadReplay& o = offload[static_cast<std::size_t>(r)];
      o.units = schedule::activation_offloads(schedule.ranks[r], model.chunk_offloads[static_cast<std::size_t>(r)]);
      o.points = schedule::offload_points(o.units, schedule.ranks[r].size());
      for (const schedule::UnitOffload& u : o.units) {
        const spec::UnitMemory& m = memory->unit_memory(layout.vstage(r, u.chunk), u.segment);
        o.activations.push_back(static_cast<double>(m.forward_activations));
        o.kv.push_back(u.segment == k - 1 ? static_cast<double>(m.forward_kv) : 0.0);
      }
      o.out_done.assign(o.units.size(), 0.0);
      o.back_done.assign(o.units.size(), 0.0);
      const double bw = static_cast<std::size_t>(r) < model.host_bytes_per_second.size()
                            ? model.host_bytes_per_second[static_cast<std::size_t>(r)] : 0.0;
      o.seconds_per_byte = bw > 0 ? 1.0 / bw : 0.0;
      if (static_cast<std::size_t>(r) < model.compute_seconds_per_byte.size()) {
        o.compute_seconds_per_byte = model.compute_seconds_per_byte[static_cast<std::size_t>(r)];
      }
    }
  }
  if (options.record_events) {
    result.events.reserve(static_cast<std::size_t>(schedule.num_actions()) +
                          (options.record_sends ? lowered.messages.size() : 0));
  }
  // A unit's in-flight weight: its share of the sequence over the rank's chunk count.
  std::vector<double> share(k);
  for (std::int32_t seg = 0; seg < k; ++seg) share[seg] = memory ? memory->token_share(seg) : 1.0 / k;

  std::vector<std::int32_t> work;
  for (int r = ranks - 1; r >= 0; --r) work.push_back(r);
  while (!work.empty()) {
    const int r = work.back();
    work.pop_back();
    const auto& program = lowered.programs[r];
    const auto& actions = schedule.ranks[r];
    const double chunks = layout.num_chunks(r);
    RankResult& rr = result.ranks[r];
    while (pc[r] < static_cast<std::int32_t>(program.size())) {
      const schedule::Op op = program[pc[r]];
      if (gates) {
        for (int woken : gates->start_before(r, pc[r], now[r])) work.push_back(woken);
        if (const int g = gates->wait_before(r, pc[r]); g >= 0) {
          if (gates->completion(g) < 0) {
            gates->waiting(r, g);
            break;
          }
          now[r] = std::max(now[r], gates->completion(g));
        }
      }
      if (op.kind == OpKind::compute) {
        const schedule::Action& a = actions[op.index];
        const std::int32_t s = layout.vstage(r, a.chunk);
        OffloadReplay& off = offload[static_cast<std::size_t>(r)];
        if (!off.empty()) {
          // The runtime's order before an action: finish the copies out due (freeing the
          // device), start the copies back due (taking it again), wait for this B's copy back.
          const double before_wait = now[r];
          for (std::int32_t u : off.points.release[static_cast<std::size_t>(op.index)]) {
            now[r] = std::max(now[r], off.out_done[static_cast<std::size_t>(u)]);
            off.move(allocated[r], activation[r], u, -1.0);
          }
          for (std::int32_t u : off.points.prefetch[static_cast<std::size_t>(op.index)]) {
            off.back_done[static_cast<std::size_t>(u)] = off.copy(now[r], off.bytes(u));
            off.move(allocated[r], activation[r], u, +1.0);
          }
          if (const std::int32_t u = off.points.before_backward[static_cast<std::size_t>(op.index)]; u >= 0) {
            now[r] = std::max(now[r], off.back_done[static_cast<std::size_t>(u)]);
            off.host_activations -= off.activations[static_cast<std::size_t>(u)];
            off.host_kv -= off.kv[static_cast<std::size_t>(u)];
          }
          rr.offload_wait += now[r] - before_wait;
        }
        const bool paired = options.overlap_pairs && forward_start[r] >= 0 && schedule::is_backward_input(a.kind) &&
                            a.chunk != forward_chunk[r];
        const double start = paired ? std::max(forward_start[r], arrived_since[r]) : now[r];
        double seconds = cost.compute_seconds(r, a.kind, a.microbatch, a.segment, s);
        if (off.compute_due > 0) {
          // The memcpy of the copies submitted since the last action (the copy out after it, the
          // copies back before this one) shares this action's core.
          seconds += off.compute_due;
          rr.offload_compute += off.compute_due;
          off.compute_due = 0;
        }
        const double end = start + seconds;
        if (options.overlap_pairs) {
          forward_start[r] = a.kind == ActionKind::F ? start : -1.0;
          forward_chunk[r] = a.chunk;
          arrived_since[r] = 0.0;
        }
        if (memory) {
          const double held = allocated[r].run(rr.allocated, *memory, a.kind, s, a.segment);
          if (replay) {
            // The static state during this action, with its activations and K/V at their peak.
            // (Under TP the action also holds a communication buffer.)
            CategoryPeaks& m = rr.memory;
            const double p = replay->parameters(r, op.index), g = replay->gradients(r, op.index);
            const auto comm = static_cast<double>(memory->unit_memory(s, a.segment).communication);
            m.parameters = std::max(m.parameters, p);
            m.gradients = std::max(m.gradients, g);
            m.communication = std::max(m.communication, comm);
            m.total = std::max(m.total, p + g + replay->optimizer(r) + held + comm);
          }
        }
        if (a.kind == ActionKind::F) {
          if (memory) activation[r] += memory->activation_bytes(s, a.segment);
          in_flight[r] += share[a.segment] / chunks;
          rr.peak_activation_bytes = std::max(rr.peak_activation_bytes, activation[r]);
          rr.peak_in_flight = std::max(rr.peak_in_flight, in_flight[r]);
        } else if (a.kind == ActionKind::B) {
          if (memory) {
            activation[r] -= memory->activation_bytes(s, a.segment) - memory->held_for_weight_bytes(s, a.segment);
          }
        } else {
          if (memory) {
            activation[r] -= a.kind == ActionKind::W
                                 ? memory->held_for_weight_bytes(s, a.segment)
                                 : memory->activation_bytes(s, a.segment);
          }
          in_flight[r] -= share[a.segment] / chunks;
        }
        // A pair's backward adds only what it runs past the F's end.
        const double busy_from = paired ? std::max(start, now[r]) : start;
        rr.busy += std::max(0.0, end - busy_from);
        now[r] = paired ? std::max(now[r], end) : end;
        if (!off.empty()) {
          if (const std::int32_t u = off.points.after_forward[static_cast<std::size_t>(op.index)]; u >= 0) {
            off.out_done[static_cast<std::size_t>(u)] = off.copy(end, off.bytes(u));
            off.host_activations += off.activations[static_cast<std::size_t>(u)];
            off.host_kv += off.kv[static_cast<std::size_t>(u)];
            off.peak_activations = std::max(off.peak_activations, off.host_activations);
            off.peak_kv = std::max(off.peak_kv, off.host_kv);
            rr.offload_bytes += off.bytes(u);
          }
        }
        if (gates) gates->start_after(r, pc[r], end);
        if (options.record_events) {
          trace::Event e;
          e.rank = r;
          e.kind = trace::event_kind(a.kind);
          e.microbatch = a.microbatch;
          e.segment = a.segment;
          e.chunk = a.chunk;
          e.start = start;
          e.end = end;
          result.events.push_back(e);
        }
      } else if (op.kind == OpKind::send) {
        const schedule::Message& msg = lowered.messages[op.index];
        const double start = std::max(now[r], port_free[r]);
        const double end = start + cost.transfer_seconds(r, msg.dst_rank, msg.bytes);
        port_free[r] = end;
        arrival[op.index] = end;
        if (options.record_events && options.record_sends) {
          const schedule::MessageKey key = lowered.key(msg);
          trace::Event e;
          e.rank = r;
          e.kind = trace::EventKind::send;
          e.microbatch = key.microbatch;
          e.segment = key.segment;
          e.start = start;
          e.end = end;
          e.peer = msg.dst_rank;
          e.bytes = msg.bytes;
          e.gradient = key.payload == schedule::Payload::gradient;
          result.events.push_back(e);
        }
        if (waiting[msg.dst_rank] == op.index) {
          waiting[msg.dst_rank] = -1;
          work.push_back(msg.dst_rank);
        }
      } else {
        if (arrival[op.index] < 0) {
          waiting[r] = op.index;
          break;
        }
        now[r] = std::max(now[r], arrival[op.index]);
        arrived_since[r] = std::max(arrived_since[r], arrival[op.index]);
      }
      ++pc[r];
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (pc[r] < static_cast<std::int32_t>(lowered.programs[r].size())) {
      throw Error("simulate: rank " + std::to_string(r) + " cannot finish (blocked at operation " +
                  std::to_string(pc[r]) + "); validate the schedule first");
    }
    result.ranks[r].finish = std::max(now[r], port_free[r]);
    CategoryPeaks& m = result.ranks[r].memory;
    m.activations = result.ranks[r].allocated.activations;
    m.kv_cache = result.ranks[r].allocated.kv_cache;
    if (replay) {
      // The update, after the rank's last action: every chunk reduced, no activations left.
      const auto end = static_cast<std::int32_t>(schedule.ranks[r].size());
      const double p = replay->parameters(r, end), g = replay->gradients(r, end);
      m.parameters = std::max(m.parameters, p);
      m.gradients = std::max(m.gradients, g);
      m.optimizer = replay->optimizer(r);
      m.total = std::max(m.total, p + g + m.optimizer);
      replay->host_peaks(r, m);
    }
    m.host_activations = offload[static_cast<std::size_t>(r)].peak_activations;
    m.host_kv_cache = offload[static_cast<std::size_t>(r)].peak_kv;
    // An upper bound: the replay's host peak and these may not coincide.
    m.host_total += m.host_activations + m.host_kv_cache;
    result.step_time = std::max(result.step_time, result.ranks[r].finish);
  }
  result.synchronized_step_time = result.step_time;
  if (gates) {
    std::vector<double> finish, ends;
    for (const RankResult& rr : result.ranks) finish.push_back(rr.finish);
    result.synchronized_step_time = gates->step_end(finish, ends);
    for (int r = 0; r < ranks; ++r) result.ranks[r].step_end = ends[static_cast<std::size_t>(r)];
  }
  double busy = 0.0;
  for (const RankResult& rr : result.ranks) busy += rr.busy;
  result.bubble_fraction = result.step_time > 0 ? 1.0 - busy / (ranks * result.step_time) : 0.0;
  return result;
}

}  // namespace plait::sim
