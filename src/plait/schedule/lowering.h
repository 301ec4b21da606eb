#pragma once
// Lowering: turns a schedule's compute actions into per-rank programs of compute, send and
// receive operations (the pass torch.distributed.pipelining calls "adding send/recv").
//
// After F of (i, j) on virtual stage s, the activation goes to whichever rank runs F(i, j, s+1);
// after B or BW, the gradient goes to whichever rank runs the backward of (i, j, s-1). Both ranks
// are looked up in the action lists (UnitIndex), so stages held by several ranks work unchanged.
// When producer and consumer are the same rank (the turn of a V layout, one rank holding
// several stages) no message is needed.
//
// Each rank's program is, per compute action in order: the receives it needs, the compute, the
// sends it produces. Every receive can be posted early: its tag is unique and its size known, so
// the runtime may post all of them (or a window of them) before executing anything.
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "plait/schedule/schedule.h"

namespace plait::schedule {

enum class Payload : std::uint8_t { activation = 0, gradient = 1 };

// A message crosses the boundary between virtual stages `boundary` and `boundary + 1`
// (activations flow up, gradients down).
struct MessageKey {
  Payload payload;
  std::int32_t microbatch;
  std::int32_t segment;
  std::int32_t boundary;
};

// One point-to-point message of a lowered schedule.
struct Message {
  std::int32_t src_rank;
  std::int32_t dst_rank;
  std::int32_t src_op;   // index of the send in src_rank's program
  std::int32_t dst_op;   // index of the receive in dst_rank's program
  std::int32_t post_op;  // index in dst_rank's program at which the receive is posted
  std::int64_t tag;      // unique per (payload, micro-batch, segment, boundary): message_tag()
  std::int64_t bytes;
};

enum class OpKind : std::uint8_t { compute = 0, send = 1, recv = 2 };

struct Op {
  OpKind kind;
  std::int32_t index;  // compute: position in the rank's action list; send/recv: message id
};

struct LoweredSchedule {
  std::vector<std::vector<Op>> programs;  // programs[r]: rank r's operations in order
  std::vector<Message> messages;
  std::int32_t num_segments = 1;
  std::int32_t num_vstages = 1;

  MessageKey key(const Message& message) const;
};

// Tag of a message: ((mb * k + seg) * (V - 1) + boundary) * 2 + payload. Dense in
// [0, 2 * m * k * (V - 1)), so it doubles as an array index.
std::int64_t message_tag(const MessageKey& key, std::int32_t segments, std::int32_t vstages);
MessageKey decode_tag(std::int64_t tag, std::int32_t segments, std::int32_t vstages);

struct LowerOptions {
  // Bytes of a message; null means 0 (timing-free uses such as deadlock checks).
  std::function<std::int64_t(const MessageKey&)> message_bytes;
  // How early receives are posted, counted in compute actions: the receives of compute action a
  // are posted when the rank reaches compute action a - recv_lookahead (0 = just before they
  // are waited on). The default posts every receive before the first operation.
  std::int32_t recv_lookahead = std::numeric_limits<std::int32_t>::max();
};

// Requires every unit to be scheduled exactly once (check with validate() first); throws
// plait::Error naming the unit otherwise.
LoweredSchedule lower(const Schedule& schedule, const LowerOptions& options = {});

}  // namespace plait::schedule
