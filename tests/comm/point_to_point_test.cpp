// Point-to-point messages: many in flight at once, matched by tag regardless of the order the
// receives were posted, exact counts enforced.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mpi_test_session.h"
#include "plait/comm/communicator.h"
#include "plait/core/error.h"

namespace plait::comm {
namespace {

Communicator& world() { return test::mpi_session().world(); }

constexpr int kMessagesPerPair = 24;

std::size_t message_length(int source, int dest, int tag) {
  return 1 + static_cast<std::size_t>((source * 7 + dest * 3 + tag * 5) % 257);
}
// Integers below 2^24, so every value is exact in fp32 and says where it came from.
float message_value(int source, int dest, int tag, std::size_t i) {
  return static_cast<float>(source * 1000000 + dest * 10000 + tag * 100 +
                            static_cast<int>(i % 100));
}

TEST(PointToPoint, ManyMessagesInFlightMatchByTagInAnyOrder) {
  Communicator& comm = world();
  const int n = comm.size();
  const int me = comm.rank();
  // Every rank sends kMessagesPerPair messages to every rank (itself included), each of its
  // own length. Receives are posted in reverse tag order; for odd peers before the sends
  // (expected messages), for even peers after them (unexpected messages).
  std::vector<std::vector<float>> outgoing;
  std::vector<std::vector<float>> incoming;
  std::vector<int> incoming_source;
  std::vector<int> incoming_tag;
  std::vector<Request> receives;
  std::vector<Request> sends;
  auto post_receives = [&](int source) {
    for (int tag = kMessagesPerPair - 1; tag >= 0; --tag) {
      incoming.emplace_back(message_length(source, me, tag), -1.0f);
      incoming_source.push_back(source);
      incoming_tag.push_back(tag);
    }
  };
  for (int source = 0; source < n; ++source) post_receives(source);
  // Post in two passes so that `incoming` no longer reallocates while receives are pending.
  for (std::size_t k = 0; k < incoming.size(); ++k) {
    if (incoming_source[k] % 2 == 1) {
      receives.push_back(comm.irecv(incoming[k], incoming_source[k], incoming_tag[k]));
    }
  }
  for (int dest = 0; dest < n; ++dest) {
    for (int tag = 0; tag < kMessagesPerPair; ++tag) {
      std::vector<float> data(message_length(me, dest, tag));
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = message_value(me, dest, tag, i);
      outgoing.push_back(std::move(data));
    }
  }
  for (int dest = 0, k = 0; dest < n; ++dest) {
    for (int tag = 0; tag < kMessagesPerPair; ++tag, ++k) {
      sends.push_back(comm.isend(outgoing[static_cast<std::size_t>(k)], dest, tag));
    }
  }
  for (std::size_t k = 0; k < incoming.size(); ++k) {
    if (incoming_source[k] % 2 == 0) {
      receives.push_back(comm.irecv(incoming[k], incoming_source[k], incoming_tag[k]));
    }
  }
  std::size_t completed = 0;
  while (wait_any(receives)) ++completed;
  EXPECT_EQ(completed, incoming.size());
  wait_all(sends);

  for (std::size_t k = 0; k < incoming.size(); ++k) {
    const std::vector<float>& data = incoming[k];
    for (std::size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(data[i], message_value(incoming_source[k], me, incoming_tag[k], i))
          << "message from rank " << incoming_source[k] << " tag " << incoming_tag[k]
          << " element " << i;
    }
  }
}

TEST(PointToPoint, SameTagMessagesArriveInSendOrder) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int kCount = 16;
  if (comm.rank() == 0) {
    std::vector<std::vector<std::int32_t>> data;
    for (int k = 0; k < kCount; ++k) data.push_back({k, 1000 + k});
    std::vector<Request> sends;
    for (int k = 0; k < kCount; ++k) sends.push_back(comm.isend(data[k], 1, 7));
    wait_all(sends);
  } else if (comm.rank() == 1) {
    std::vector<std::vector<std::int32_t>> data(kCount, std::vector<std::int32_t>(2, -1));
    std::vector<Request> receives;
    for (int k = 0; k < kCount; ++k) receives.push_back(comm.irecv(data[k], 0, 7));
    wait_all(receives);
    for (int k = 0; k < kCount; ++k) {
      EXPECT_EQ(data[k][0], k);
      EXPECT_EQ(data[k][1], 1000 + k);
    }
  }
}

// Large messages take MPI's rendezvous path (and shared-memory single copy), unlike the small
// ones above.
TEST(PointToPoint, LargeMessagesBothWays) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  if (comm.rank() > 1) return;
  constexpr std::size_t kLength = std::size_t{1} << 21;  // 8 MiB of fp32
  const int peer = 1 - comm.rank();
  std::vector<float> out(kLength), in(kLength, -1.0f);
  for (std::size_t i = 0; i < kLength; ++i) {
    out[i] = static_cast<float>(comm.rank() * 4000000 + static_cast<int>(i % 4000000));
  }
  std::vector<Request> pending;
  pending.push_back(comm.irecv(in, peer, 2));
  pending.push_back(comm.isend(out, peer, 2));
  wait_all(pending);
  for (std::size_t i = 0; i < kLength; ++i) {
    ASSERT_EQ(in[i], static_cast<float>(peer * 4000000 + static_cast<int>(i % 4000000))) << i;
  }
}

TEST(PointToPoint, Int32RingKeepsEveryBit) {
  Communicator& comm = world();
  const int n = comm.size();
  const int right = (comm.rank() + 1) % n;
  const int left = (comm.rank() + n - 1) % n;
  // Values a float could not carry exactly.
  const std::vector<std::int32_t> mine = {std::numeric_limits<std::int32_t>::max() - comm.rank(),
                                          std::numeric_limits<std::int32_t>::min() + comm.rank(),
                                          16777217 + comm.rank()};
  std::vector<std::int32_t> theirs(3, 0);
  Request receive = comm.irecv(theirs, left, 3);
  Request send = comm.isend(mine, right, 3);
  receive.wait();
  send.wait();
  EXPECT_EQ(theirs[0], std::numeric_limits<std::int32_t>::max() - left);
  EXPECT_EQ(theirs[1], std::numeric_limits<std::int32_t>::min() + left);
  EXPECT_EQ(theirs[2], 16777217 + left);
}

// Rank 1 sends `sent` floats that rank 0 receives into a buffer of `expected`; returns the
// error rank 0 gets ("" if none, and on other ranks).
std::string receive_error(Communicator& comm, std::size_t sent, std::size_t expected, int tag) {
  if (comm.rank() == 1) {
    std::vector<float> data(sent, 1.0f);
    comm.isend(data, 0, tag).wait();
  } else if (comm.rank() == 0) {
    std::vector<float> data(expected, 0.0f);
    Request receive = comm.irecv(data, 1, tag);
    try {
      receive.wait();
    } catch (const Error& e) {
      EXPECT_FALSE(receive.active()) << "a failed request stays active";
      return e.what();
    }
  }
  return "";
}

TEST(PointToPoint, MessageOfAnotherLengthThanExpectedIsAnError) {
  Communicator& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::string shorter = receive_error(comm, 3, 4, 9);
  const std::string longer = receive_error(comm, 5, 4, 10);
  if (comm.rank() == 0) {
    EXPECT_EQ(shorter, "receive of 4 floats from rank 1 (tag 9): expected 4 floats, received 3");
    EXPECT_EQ(longer, "receive of 4 floats from rank 1 (tag 10): the message holds more than "
                      "the expected 4 floats");
  }
}

TEST(PointToPoint, BadPeerOrTagIsRejectedBeforeAnythingIsPosted) {
  Communicator& comm = world();
  std::vector<float> data(2);
  const int n = comm.size();
  try {
    comm.isend(data, n, 0);
    FAIL() << "peer " << n << " accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("peer " + std::to_string(n) + " is outside the group of " +
                                         std::to_string(n) + " ranks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm.irecv(data, -1, 0), Error);
  EXPECT_THROW(comm.irecv(data, 0, -1), Error);
  try {
    comm.isend(data, 0, -2);
    FAIL() << "tag -2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tag -2 is outside 0.." + std::to_string(comm.max_tag())),
              std::string::npos)
        << e.what();
  }
  // OpenMPI's bound is INT_MAX, leaving no int above it; other MPIs may have room.
  if (comm.max_tag() < std::numeric_limits<int>::max()) {
    EXPECT_THROW(comm.isend(data, 0, comm.max_tag() + 1), Error);
  }
  // MPI guarantees at least 32767 tags; the runtime encodes (micro-batch, segment, chunk) in them.
  EXPECT_GE(comm.max_tag(), 32767);
}

}  // namespace
}  // namespace plait::comm
