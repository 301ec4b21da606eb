// Misuse of the unit protocol is a clear error, not silent corruption.
#include <gtest/gtest.h>

#include <vector>

#include "plait/core/error.h"
#include "plait/core/memory_tracker.h"
#include "tiny_model.h"

namespace plait::model {
namespace {

using namespace plait::model::testing;

class UnitOrder : public FamilyTest {};

TEST_P(UnitOrder, OutOfOrderCallsAreErrorsNamingStageMicrobatchAndSegment) {
  const spec::ModelSpec config = tiny();
  MemoryTracker tracker;
  StageModel m(config, StageSpec::whole_model(config), tracker);
  const Batch b = random_batch(1, 10, config.vocab, 1);
  const auto segs = segments_from_lengths(10, {6, 4});
  auto fwd = [&](const Segment& s, int rows = 1) {
    const auto tok = columns(b.tokens, 1, 10, s);
    const auto tgt = columns(b.targets, 1, 10, s);
    return m.forward_loss(0, rows, s, nullptr, tok.data(), tgt.data(), 1.0);
  };
  try {
    fwd(segs[1]);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "stage [0, 2)+embedding+head: micro-batch 0 segment 1: forwards of a micro-batch's "
              "segments must run in order 0, 1, ...");
  }
  fwd(segs[0]);
  EXPECT_THROW(fwd(segs[0]), Error);                             // segment 0 again
  EXPECT_THROW(fwd(Segment{1, 5, 4}), Error);                    // gap/overlap
  EXPECT_THROW(fwd(segs[1], 2), Error);                          // batch changes
  EXPECT_THROW(m.backward_input(0, segs[1], nullptr, nullptr), Error);  // not forwarded
  fwd(segs[1]);
  EXPECT_THROW(m.backward_input(0, segs[0], nullptr, nullptr), Error);  // must start at k-1
  EXPECT_THROW(m.backward_weight(0, segs[1]), Error);                   // W before B
  m.backward_input(0, segs[1], nullptr, nullptr);
  EXPECT_THROW(fwd(Segment{2, 10, 1}), Error);                  // forward after backward began
  m.backward(0, segs[0], nullptr, nullptr);
  EXPECT_EQ(m.microbatches_in_flight(), 1u);  // segment 1's W is still pending
  m.backward_weight(0, segs[1]);
  EXPECT_THROW(m.backward_weight(0, segs[1]), Error);
  EXPECT_EQ(m.microbatches_in_flight(), 0u);
  // Past max_seq (token buffers as long as the segment: the check must fire, not an overread).
  const std::vector<std::int32_t> long_tokens(25, 0);
  EXPECT_THROW(m.forward_loss(0, 1, Segment{0, 0, 25}, nullptr, long_tokens.data(), long_tokens.data(), 1.0),
               Error);
  EXPECT_THROW(m.forward(1, 1, segs[0], nullptr, b.tokens.data(), nullptr), Error);  // head stage
}

PLAIT_FOR_EVERY_FAMILY(UnitOrder);

}  // namespace
}  // namespace plait::model
