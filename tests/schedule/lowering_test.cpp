#include <gtest/gtest.h>

#include <set>

#include "plait/schedule/lowering.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"

namespace plait::schedule {
namespace {

// Every message has one send and one receive at the ops that name it, a unique tag that
// decodes to its (payload, micro-batch, segment, boundary), and travels between the ranks that
// run the producing and consuming units.
void expect_consistent(const Schedule& s, const LoweredSchedule& low) {
  std::set<std::int64_t> tags;
  for (std::size_t id = 0; id < low.messages.size(); ++id) {
    const Message& m = low.messages[id];
    ASSERT_TRUE(tags.insert(m.tag).second) << "duplicate tag " << m.tag;
    const Op send = low.programs[m.src_rank][m.src_op];
    const Op recv = low.programs[m.dst_rank][m.dst_op];
    EXPECT_EQ(send.kind, OpKind::send);
    EXPECT_EQ(recv.kind, OpKind::recv);
    EXPECT_EQ(send.index, static_cast<std::int32_t>(id));
    EXPECT_EQ(recv.index, static_cast<std::int32_t>(id));
    EXPECT_NE(m.src_rank, m.dst_rank);
    const MessageKey key = low.key(m);
    EXPECT_EQ(message_tag(key, s.layout.num_segments, s.layout.num_vstages), m.tag);
    // The producer computes just before the send, the consumer just after the receive.
    const Action& producer = s.ranks[m.src_rank][low.programs[m.src_rank][m.src_op - 1].index];
    const Action& consumer = s.ranks[m.dst_rank][low.programs[m.dst_rank][m.dst_op + 1].index];
    EXPECT_EQ(producer.microbatch, key.microbatch);
    EXPECT_EQ(consumer.microbatch, key.microbatch);
    EXPECT_EQ(producer.segment, key.segment);
    const std::int32_t from = s.layout.vstage(m.src_rank, producer.chunk);
    const std::int32_t to = s.layout.vstage(m.dst_rank, consumer.chunk);
    if (key.payload == Payload::activation) {
      EXPECT_EQ(producer.kind, ActionKind::F);
      EXPECT_EQ(from, key.boundary);
      EXPECT_EQ(to, key.boundary + 1);
    } else {
      EXPECT_TRUE(is_backward_input(producer.kind));
      EXPECT_EQ(from, key.boundary + 1);
      EXPECT_EQ(to, key.boundary);
    }
  }
}

TEST(Lowering, OneFOneBSendsEachActivationAndGradientOnce) {
  const Schedule s = generate_schedule("1f1b", {4, 1, 8, 1});
  LowerOptions options;
  options.message_bytes = [](const MessageKey& key) {
    return key.payload == Payload::activation ? 1000 + key.microbatch : 7;
  };
  const LoweredSchedule low = lower(s, options);
  EXPECT_EQ(low.messages.size(), 2u * 8 * 3);  // 2 directions x m x (p - 1) boundaries
  expect_consistent(s, low);
  for (const Message& m : low.messages) {
    const MessageKey key = low.key(m);
    EXPECT_EQ(m.bytes, key.payload == Payload::activation ? 1000 + key.microbatch : 7);
    EXPECT_EQ(m.post_op, 0);  // posted before anything runs
  }
  // Rank 1's program: recv, F0, send, ... as the schedule orders its compute actions.
  const auto& p1 = low.programs[1];
  ASSERT_GE(p1.size(), 3u);
  EXPECT_EQ(p1[0].kind, OpKind::recv);
  EXPECT_EQ(p1[1].kind, OpKind::compute);
  EXPECT_EQ(p1[2].kind, OpKind::send);
}

// In the V layout rank p-1 holds stages p-1 and p: the turn needs no message.
TEST(Lowering, VLayoutTurnStaysOnTheRank) {
  const int p = 4, m = 5;
  const Schedule s = generate_schedule("zb-v", {p, 2, m, 1});
  const LoweredSchedule low = lower(s);
  expect_consistent(s, low);
  EXPECT_EQ(low.messages.size(), 2u * m * (2 * p - 2));
  for (const Message& msg : low.messages) EXPECT_NE(low.key(msg).boundary, p - 1);
}

// Replicas talk only within themselves; the uneven heterogeneous stage routes micro-batch 3
// through its own rank in both directions.
TEST(Lowering, RoutesByLookupOnMultiRankStages) {
  const Schedule s = replicate(generate_schedule("seq1f1b", {3, 1, 4, 2}), 2);
  const LoweredSchedule low = lower(s);
  expect_consistent(s, low);
  for (const Message& m : low.messages) EXPECT_EQ(m.src_rank / 3, m.dst_rank / 3);

  const Schedule uneven = parse_schedule(
      "layout 0 0 1\nF0.0 F1.0 BW0.0 F2.0 BW1.0 BW2.0\nF3.0 BW3.0\n"
      "F0.0 BW0.0 F3.0 BW3.0 F1.0 BW1.0 F2.0 BW2.0\n", "uneven");
  const LoweredSchedule ul = lower(uneven);
  expect_consistent(uneven, ul);
  for (const Message& m : ul.messages) {
    const bool slow_rank = m.src_rank == 1 || m.dst_rank == 1;
    EXPECT_EQ(slow_rank, ul.key(m).microbatch == 3);
  }
}

// recv_lookahead L posts the receives of compute action a when the rank reaches action a - L.
TEST(Lowering, ReceiveLookaheadSetsThePostPosition) {
  const Schedule s = generate_schedule("1f1b", {3, 1, 6, 1});
  for (int lookahead : {0, 1, 3}) {
    LowerOptions options;
    options.recv_lookahead = lookahead;
    const LoweredSchedule low = lower(s, options);
    for (const Message& m : low.messages) {
      const auto& program = low.programs[m.dst_rank];
      const int consumer = program[m.dst_op + 1].index;
      const int post_action = std::max(0, consumer - lookahead);
      // The first op of post_action: its receive if it has one, else its compute.
      int first = 0;
      while (!(program[first].kind == OpKind::compute && program[first].index == post_action)) ++first;
      if (first > 0 && program[first - 1].kind == OpKind::recv) --first;
      EXPECT_EQ(m.post_op, first) << "lookahead " << lookahead;
    }
  }
}

}  // namespace
}  // namespace plait::schedule
