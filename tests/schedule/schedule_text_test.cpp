#include <gtest/gtest.h>

#include <string>

#include "plait/core/error.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"

namespace plait::schedule {
namespace {

TEST(ActionText, FormatsAndParsesEachKind) {
  const Action cases[] = {{ActionKind::F, 0, 1, 0}, {ActionKind::B, 12, 3, 0},
                          {ActionKind::W, 2, 1, 1}, {ActionKind::BW, 7, 0, 2}};
  for (const Action& a : cases) {
    const std::string text = to_string(a, true);
    Action back;
    std::string error;
    std::size_t offset = 0;
    ASSERT_TRUE(parse_action(text, back, error, offset)) << text << ": " << error;
    EXPECT_EQ(back, a) << text;
  }
  EXPECT_EQ(to_string({ActionKind::F, 0, 1, 0}, false), "F0.1");
  EXPECT_EQ(to_string({ActionKind::W, 2, 1, 1}, true), "W2.1c1");
  EXPECT_EQ(to_string({ActionKind::BW, 3, 0, 0}, false), "BW3.0");
}

// format -> parse gives back exactly the same schedule (layout included) for every family, a
// V layout, a replicated (data-parallel) schedule and a rank without actions.
TEST(ScheduleText, RoundTripsExactly) {
  std::vector<Schedule> cases;
  for (const ScheduleFamily& f : schedule_families()) {
    for (const PipelineShape shape : {PipelineShape{4, 2, 8, 3}, PipelineShape{3, 2, 7, 1}}) {
      PipelineShape s = shape;
      if (!f.sequence_level) s.segments = 1;
      if (f.fixed_chunks > 0) s.chunks = f.fixed_chunks;
      cases.push_back(generate_schedule(f, s));
    }
  }
  cases.push_back(replicate(generate_schedule("zb-v", {3, 2, 4, 1}), 2));
  Schedule odd = generate_schedule("1f1b", {2, 1, 3, 1});
  odd.layout.num_microbatches = 5;  // declared but never scheduled: needs the directive
  odd.ranks[1].clear();             // an empty rank is written as "-"
  cases.push_back(odd);
  for (const Schedule& s : cases) {
    const std::string text = format_schedule(s);
    const Schedule back = parse_schedule(text, "roundtrip");
    EXPECT_EQ(back, s) << text;
    EXPECT_EQ(format_schedule(back), text);
  }
}

TEST(ScheduleText, PlainTextNeedsNoDirectives) {
  const Schedule s = parse_schedule("F0.0 F1.0 BW0.0 BW1.0\n  # comment\nF0.0 BW0.0 F1.0 BW1.0\n", "t");
  EXPECT_EQ(s.num_ranks(), 2);
  EXPECT_EQ(s.layout, interleaved_layout(2, 1, 2, 1));
  EXPECT_EQ(s.ranks[1][2], (Action{ActionKind::F, 1, 0, 0}));
  EXPECT_EQ(format_schedule(s), "F0.0 F1.0 BW0.0 BW1.0\nF0.0 BW0.0 F1.0 BW1.0\n");
  // Chunks: "c1" widens the default layout to two chunks per rank.
  const Schedule v2 = parse_schedule("F0.0c0 F0.0c1 BW0.0c1 BW0.0c0\n", "t");
  EXPECT_EQ(v2.layout, interleaved_layout(1, 2, 1, 1));
}

// Malformed text: one error naming the source, line and column and what was expected.
TEST(ScheduleText, MalformedTextNamesLineAndColumn) {
  struct Case {
    const char* text;
    const char* where;
    const char* problem;
  };
  const Case cases[] = {
      {"F0.0 BW0.0\nF0.0 Q1.0\n", "t.txt: line 2, column 6: ", "expected an action kind"},
      {"F0.0 F0x0\n", "t.txt: line 1, column 8: ", "expected '.' and a segment number"},
      {"F0.0 F1.\n", "t.txt: line 1, column 9: ", "expected a segment number after '.'"},
      {"F0.0c\n", "t.txt: line 1, column 6: ", "expected a chunk number after 'c'"},
      {"F0.0c1x\n", "t.txt: line 1, column 7: ", "unexpected characters"},
      // Found by fuzz_schedule_text: a chunk this large made the inferred layout allocate for
      // minutes.
      {"F0.9\nB0.0c310000000 B0.0", "t.txt: line 2, column 6: ", "expected a chunk number in [0, 1023]"},
      {"F0.0c1024\n", "t.txt: line 1, column 6: ", "expected a chunk number in [0, 1023]"},
      {"F0.0\nlayout 0\n", "t.txt: line 2, column 1: ", "'layout' must appear once"},
      {"layout 0,x\nF0.0\n", "t.txt: line 1, column 10: ", "comma-separated list"},
      {"segments 0\nF0.0\n", "t.txt: line 1, column 10: ", "positive integer"},
      {"layout 0 1\nF0.0\n", "t.txt: line 1: ", "lists 2 ranks but there are 1 lines"},
      {"# nothing\n\n", "t.txt: text: ", "found none"},
  };
  for (const Case& c : cases) {
    try {
      parse_schedule(c.text, "t.txt");
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(c.where, 0), 0u) << what;
      EXPECT_NE(what.find(c.problem), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    }
  }
}

// A token's bytes are echoed in the error, so they must be valid UTF-8 on one line whatever the
// file held: invalid bytes and control characters come back as \xNN.
TEST(ScheduleText, ErrorsEchoOnlyPrintableUtf8) {
  try {
    parse_schedule("F0.0 Q\xff\xfe\x1b[2J\n", "t.txt");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "t.txt: line 1, column 6: expected an action kind F, B, W or BW (in 'Q\\xff\\xfe\\x1b[2J')");
  }
  try {
    parse_schedule("layout 0,\xc3\nF0.0\n", "t.txt");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("found '0,\\xc3'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plait::schedule
