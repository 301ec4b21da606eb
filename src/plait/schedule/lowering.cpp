#include "plait/schedule/lowering.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"
#include "plait/schedule/unit_index.h"

namespace plait::schedule {

std::int64_t message_tag(const MessageKey& key, std::int32_t segments, std::int32_t vstages) {
  const std::int64_t unit = std::int64_t{key.microbatch} * segments + key.segment;
  return (unit * (vstages - 1) + key.boundary) * 2 + static_cast<int>(key.payload);
}

MessageKey decode_tag(std::int64_t tag, std::int32_t segments, std::int32_t vstages) {
  MessageKey key;
  key.payload = static_cast<Payload>(tag % 2);
  const std::int64_t rest = tag / 2;
  key.boundary = static_cast<std::int32_t>(rest % (vstages - 1));
  const std::int64_t unit = rest / (vstages - 1);
  key.segment = static_cast<std::int32_t>(unit % segments);
  key.microbatch = static_cast<std::int32_t>(unit / segments);
  return key;
}

MessageKey LoweredSchedule::key(const Message& message) const {
  return decode_tag(message.tag, num_segments, num_vstages);
}

namespace {

[[noreturn]] void missing(const char* what, std::int32_t mb, std::int32_t seg, std::int32_t vstage) {
  throw Error("lower: " + std::string(what) + " of micro-batch " + std::to_string(mb) +
              " segment " + std::to_string(seg) + " on virtual stage " + std::to_string(vstage) +
              " is not scheduled exactly once (run the validator first)");
}

}  // namespace

LoweredSchedule lower(const Schedule& schedule, const LowerOptions& options) {
  const Layout& layout = schedule.layout;
  const std::int32_t V = layout.num_vstages;
  const std::int32_t k = layout.num_segments;
  const UnitIndex index(schedule);

  LoweredSchedule lowered;
  lowered.num_segments = k;
  lowered.num_vstages = V;
  lowered.programs.resize(schedule.num_ranks());
  const std::int64_t units_per_stage = std::int64_t{layout.num_microbatches} * k;
  const std::int64_t slots = V > 1 ? 2 * units_per_stage * (V - 1) : 0;
  // Message id per (payload, boundary, micro-batch, segment), boundary-major so one rank's
  // lookups stay close together (the tag's order would stride by 2(V-1)).
  std::vector<std::int32_t> message_of_slot(static_cast<std::size_t>(slots), -1);
  auto slot = [&](const MessageKey& key) {
    return (std::int64_t{key.boundary} * 2 + static_cast<int>(key.payload)) * units_per_stage +
           std::int64_t{key.microbatch} * k + key.segment;
  };
  lowered.messages.reserve(static_cast<std::size_t>(schedule.num_actions()));

  // Pass 1: one message per input that crosses ranks, numbered in the consumers' order.
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    for (const Action& a : schedule.ranks[r]) {
      const std::int32_t s = layout.vstage(r, a.chunk);
      std::int64_t producer_unit;
      ActionKind producer_kind;
      MessageKey key{Payload::activation, a.microbatch, a.segment, 0};
      if (a.kind == ActionKind::F && s > 0) {
        producer_unit = index.unit(a.microbatch, a.segment, s - 1);
        producer_kind = ActionKind::F;
        key = {Payload::activation, a.microbatch, a.segment, s - 1};
      } else if (is_backward_input(a.kind) && s < V - 1) {
        producer_unit = index.unit(a.microbatch, a.segment, s + 1);
        producer_kind = index.backward_kind(producer_unit);
        key = {Payload::gradient, a.microbatch, a.segment, s};
      } else {
        continue;
      }
      const std::int32_t src = index.rank(producer_kind, producer_unit);
      if (src == UnitIndex::kNone || index.count(producer_kind, producer_unit) != 1) {
        missing(producer_kind == ActionKind::F ? "the forward" : "the backward", a.microbatch,
                a.segment, producer_kind == ActionKind::F ? s - 1 : s + 1);
      }
      if (src == r) continue;
      message_of_slot[slot(key)] = static_cast<std::int32_t>(lowered.messages.size());
      lowered.messages.push_back(Message{src, r, -1, -1, -1, message_tag(key, k, V),
                                         options.message_bytes ? options.message_bytes(key) : 0});
    }
  }

  // Pass 2: the programs. Receives before their consumer, sends right after their producer.
  std::vector<std::int32_t> first_op;  // first op index of each compute action (for posting)
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    const auto& actions = schedule.ranks[r];
    auto& program = lowered.programs[r];
    program.reserve(actions.size() * 3);
    first_op.assign(actions.size(), 0);
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const std::int32_t s = layout.vstage(r, a.chunk);
      first_op[i] = static_cast<std::int32_t>(program.size());
      std::int64_t in_slot = -1;
      if (a.kind == ActionKind::F && s > 0) {
        in_slot = slot({Payload::activation, a.microbatch, a.segment, s - 1});
      } else if (is_backward_input(a.kind) && s < V - 1) {
        in_slot = slot({Payload::gradient, a.microbatch, a.segment, s});
      }
      if (in_slot >= 0 && message_of_slot[in_slot] >= 0) {
        const std::int32_t id = message_of_slot[in_slot];
        Message& msg = lowered.messages[id];
        msg.dst_op = static_cast<std::int32_t>(program.size());
        const std::int64_t post_action =
            std::max<std::int64_t>(0, static_cast<std::int64_t>(i) - options.recv_lookahead);
        msg.post_op = first_op[post_action];
        program.push_back({OpKind::recv, id});
      }
      program.push_back({OpKind::compute, static_cast<std::int32_t>(i)});
      std::int64_t out_slot = -1;
      if (a.kind == ActionKind::F && s < V - 1) {
        out_slot = slot({Payload::activation, a.microbatch, a.segment, s});
      } else if (is_backward_input(a.kind) && s > 0) {
        out_slot = slot({Payload::gradient, a.microbatch, a.segment, s - 1});
      }
      if (out_slot >= 0 && message_of_slot[out_slot] >= 0) {
        const std::int32_t id = message_of_slot[out_slot];
        Message& msg = lowered.messages[id];
        if (msg.src_rank != r) {
          throw Error("lower: rank " + std::to_string(r) + " position " + std::to_string(i) +
                      " sends a message that rank " + std::to_string(msg.src_rank) +
                      " was expected to send (run the validator first)");
        }
        msg.src_op = static_cast<std::int32_t>(program.size());
        program.push_back({OpKind::send, id});
      }
    }
  }
  for (const Message& msg : lowered.messages) {
    if (msg.src_op < 0 || msg.dst_op < 0) {
      const MessageKey key = lowered.key(msg);
      missing("a message endpoint", key.microbatch, key.segment, key.boundary);
    }
  }
  return lowered;
}

}  // namespace plait::schedule
