#include <gtest/gtest.h>

#include <string>

#include "plait/core/error.h"
#include "plait/schedule/generators.h"
#include "plait/schedule/layout.h"
#include "plait/schedule/grouped_interleaving.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"
#include "plait/schedule/validator.h"

namespace plait::schedule {
namespace {

// Every family, on every shape it accepts in the acceptance grid p 1..8, m 1..16, k 1..4,
// v 1..2, produces a schedule that validates (including the blocking send/recv deadlock check).
// Every family accepts every p and m of the grid except DualPipeV, which needs m >= 2p.
TEST(Generators, EveryFamilyValidatesOnTheGrid) {
  int generated = 0, expected = 0;
  for (const ScheduleFamily& family : schedule_families()) {
    // The grid's shapes the family accepts: every p and m, every k if sequence-level (else k = 1),
    // and one v of 1..2 (1 contiguous, 2 for the V and for interleaving, which needs v >= 2).
    const int shapes_of_p_and_m = family.name == "dualpipe-v" ? 64 : 8 * 16;  // m >= 2p: sum over p of 17 - 2p
    expected += shapes_of_p_and_m * (family.sequence_level ? 4 : 1);
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        for (int k = 1; k <= 4; ++k) {
          for (int v = 1; v <= 2; ++v) {
            const PipelineShape shape{p, v, m, k};
            if (!unsupported_reason(family, shape).empty()) continue;
            const Schedule s = generate_schedule(family, shape);
            const auto violation = validate(s);
            ASSERT_FALSE(violation.has_value())
                << family.name << " p=" << p << " m=" << m << " k=" << k << " v=" << v << "\n"
                << describe(s, *violation);
            EXPECT_EQ(s.layout.num_microbatches, m);
            EXPECT_EQ(s.layout.num_segments, k);
            ++generated;
          }
        }
      }
    }
  }
  EXPECT_EQ(generated, expected);
}

}  // namespace
}  // namespace plait::schedule

namespace plait::schedule {
namespace {

Schedule gen(const char* name, int p, int v, int m, int k) { return generate_schedule(name, {p, v, m, k}); }

// Seq1F1B with one segment is 1F1B action for action, and seq-zb with one segment is ZB-H1.
TEST(Generators, OneSegmentReducesToTheMicroBatchSchedules) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      EXPECT_EQ(gen("seq1f1b", p, 1, m, 1), gen("1f1b", p, 1, m, 1)) << "p=" << p << " m=" << m;
      EXPECT_EQ(gen("seq-zb", p, 1, m, 1), gen("zb-h1", p, 1, m, 1)) << "p=" << p << " m=" << m;
    }
  }
}

// ../shared/reference/seq1f1b.md: stage 0, p=4, k=2, m=4 starts
// F0.0 F0.1 F1.0 F1.1 F2.0 B0.1 F2.1 B0.0 F3.0 B1.1.
TEST(Generators, Seq1F1BMatchesTheReferenceOrder) {
  const Schedule s = gen("seq1f1b", 4, 1, 4, 2);
  std::string first;
  for (int i = 0; i < 10; ++i) {
    if (i) first += ' ';
    first += to_string(s.ranks[0][i], false);
  }
  EXPECT_EQ(first, "F0.0 F0.1 F1.0 F1.1 F2.0 BW0.1 F2.1 BW0.0 F3.0 BW1.1");
}

// Forwards a rank runs before its first backward: its warm-up plus the steady phase's first
// forward (all of them when the warm-up covers every forward).
int forwards_before_first_backward(const std::vector<Action>& actions) {
  int n = 0;
  while (n < static_cast<int>(actions.size()) && actions[n].kind == ActionKind::F) ++n;
  return n;
}

int expected_leading_forwards(int warmup, int forwards) {
  return warmup < forwards ? warmup + 1 : forwards;
}

// Warm-up counts: 1F1B p-r-1; Seq1F1B p-r-1+k-1; interleaved Megatron's 2(p-r-1)+(v-1)p when
// p divides m; Seq1F1B-I thunlp's (v-1)p + 2(p-r-1) + k-1 when k divides p.
TEST(Generators, WarmupCountsFollowTheReferences) {
  for (int p : {2, 4, 8}) {
    for (int k : {1, 2, 4}) {
      const int m = 2 * p;
      const Schedule one = gen("1f1b", p, 1, m, 1);
      const Schedule seq = gen("seq1f1b", p, 1, m, k);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(forwards_before_first_backward(one.ranks[r]), expected_leading_forwards(p - r - 1, m));
        EXPECT_EQ(forwards_before_first_backward(seq.ranks[r]),
                  expected_leading_forwards(p - r - 1 + k - 1, m * k));
      }
      for (int v : {2, 3}) {
        const Schedule inter = gen("interleaved", p, v, m, 1);
        const Schedule seqi = gen("seq1f1b-i", p, v, m, k);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(forwards_before_first_backward(inter.ranks[r]),
                    expected_leading_forwards(2 * (p - r - 1) + (v - 1) * p, m * v))
              << "p=" << p << " v=" << v << " r=" << r;
          if (p % k == 0) {
            EXPECT_EQ(forwards_before_first_backward(seqi.ranks[r]),
                      expected_leading_forwards((v - 1) * p + 2 * (p - r - 1) + k - 1, m * v * k))
                << "p=" << p << " v=" << v << " k=" << k << " r=" << r;
          }
        }
      }
    }
  }
}

TEST(Generators, InterleavingGroupsTakeTheRemainderFirst) {
  EXPECT_EQ(interleaving_groups(8, 4), (std::vector<int>{4, 4}));
  EXPECT_EQ(interleaving_groups(10, 4), (std::vector<int>{5, 5}));
  EXPECT_EQ(interleaving_groups(9, 4), (std::vector<int>{5, 4}));
  EXPECT_EQ(interleaving_groups(3, 4), (std::vector<int>{3}));
  EXPECT_EQ(interleaving_groups(13, 4), (std::vector<int>{5, 4, 4}));
}

TEST(Generators, GPipeRunsAllForwardsFirstAndZbVRespectsItsMemoryLimit) {
  const Schedule g = gen("gpipe", 4, 1, 6, 1);
  for (const auto& actions : g.ranks) EXPECT_EQ(forwards_before_first_backward(actions), 6);
  for (int p = 1; p <= 8; ++p) {
    const Schedule v = gen("zb-v", p, 2, 16, 1);
    EXPECT_EQ(v.layout, v_shape_layout(p, 16, 1));
    for (const auto& actions : v.ranks) {
      int live = 0, peak = 0;
      for (const Action& a : actions) {
        live += a.kind == ActionKind::F ? 1 : a.kind == ActionKind::W ? -1 : 0;
        peak = std::max(peak, live);
      }
      EXPECT_LE(peak, 2 * p);  // 1F1B's p micro-batches, in half-model chunks
    }
  }
}

std::string rank_text(const std::vector<Action>& actions) {
  std::string text;
  for (const Action& a : actions) text += (text.empty() ? "" : " ") + to_string(a, true);
  return text;
}

// DualPipeV's eight phases for p = 2, m = 4, written out by hand from dualpipev.py's loop counts
// (dualpipe_v.cpp): rank 0 warms up with 2(p-r-1) = 2 chunk-0 forwards, rank 1 with none; the
// zero-bubble W's of phase 6 start at its second half (on the chunk-0 backward for even r, the
// chunk-1 one for odd r) and run in phases 7 and 8, oldest first.
TEST(Generators, DualPipeVFollowsTheReferencePhases) {
  const Schedule s = gen("dualpipe-v", 2, 2, 4, 1);
  EXPECT_EQ(s.layout, v_shape_layout(2, 4, 1));
  EXPECT_EQ(rank_text(s.ranks[0]),
            "F0.0c0 F1.0c0 F2.0c0 F0.0c1 B0.0c1 W0.0c1 F1.0c1 F3.0c0 B1.0c1 W1.0c1 F2.0c1 B0.0c0 W0.0c0 "
            "B2.0c1 W2.0c1 F3.0c1 B1.0c0 W1.0c0 B3.0c1 W3.0c1 B2.0c0 W2.0c0 B3.0c0 W3.0c0");
  EXPECT_EQ(rank_text(s.ranks[1]),
            "F0.0c0 F0.0c1 F1.0c0 F1.0c1 F2.0c0 B0.0c1 W0.0c1 F2.0c1 B0.0c0 W0.0c0 F3.0c0 B1.0c1 W1.0c1 "
            "F3.0c1 B1.0c0 W1.0c0 B2.0c1 W2.0c1 B2.0c0 W2.0c0 B3.0c1 B3.0c0 W3.0c1 W3.0c0");
}

// Looped BFS runs every micro-batch of chunk 0, then of chunk 1, ..., then the backwards chunk
// v-1..0, on every rank; with segments, forwards ascend and backwards descend within a micro-batch.
TEST(Generators, LoopedBfsIsBreadthFirst) {
  const Schedule s = gen("looped-bfs", 2, 2, 2, 2);
  for (const auto& actions : s.ranks) {
    EXPECT_EQ(rank_text(actions),
              "F0.0c0 F0.1c0 F1.0c0 F1.1c0 F0.0c1 F0.1c1 F1.0c1 F1.1c1 "
              "BW0.1c1 BW0.0c1 BW1.1c1 BW1.0c1 BW0.1c0 BW0.0c0 BW1.1c0 BW1.0c0");
  }
}

TEST(Generators, RejectsShapesOutsideTheirFamilyWithAReason) {
  struct Case {
    const char* name;
    PipelineShape shape;
    const char* reason;
  };
  const Case cases[] = {
      {"1f1b", {4, 1, 8, 2}, "segments must be 1"},
      {"interleaved", {4, 1, 8, 1}, "v >= 2 chunks"},
      {"zb-v", {4, 3, 8, 1}, "exactly 2 chunk(s)"},
      {"dualpipe-v", {4, 2, 7, 1}, "needs m >= 2p micro-batches"},
      {"looped-bfs", {4, 1, 8, 1}, "with one chunk use gpipe"},
      {"seq1f1b", {4, 1, 0, 2}, "at least 1 micro-batch"},
      {"gpipe", {0, 1, 4, 1}, "at least 1 pipeline stage"},
  };
  for (const Case& c : cases) {
    try {
      generate_schedule(c.name, c.shape);
      ADD_FAILURE() << c.name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(std::string(c.name) + ": ", 0), 0u) << e.what();
    }
  }
  try {
    generate_schedule("pipedream", {4, 1, 8, 1});
    ADD_FAILURE() << "unknown name accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(schedule_family_names()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plait::schedule
