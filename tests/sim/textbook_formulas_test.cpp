// With unit costs (F = B = W, free communication) the simulator must reproduce the textbook
// bubble fractions and peak activations of ../shared/reference/schedules.md. Each unit costs
// 1/(k*v) so a micro-batch's F, B and W each take 1 on every rank. Where a formula is only an
// approximation of the exact makespan, the exact value is pinned here and explained in
// docs/schedules.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "plait/schedule/lowering.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/sim/event_simulator.h"

namespace plait::sim {
namespace {

struct UnitRun {
  double step = 0;
  double bubble = 0;
  double peak = 0;  // micro-batches of activations, worst rank
};

UnitRun run(const schedule::Schedule& s, int v, int k) {
  const double unit = 1.0 / (k * v);
  const UniformCostModel cost(unit, unit, unit);
  const SimResult r = simulate(s, schedule::lower(s), cost, nullptr, {false, false});
  UnitRun out{r.step_time, r.bubble_fraction, 0};
  for (const RankResult& rr : r.ranks) out.peak = std::max(out.peak, rr.peak_in_flight);
  return out;
}

UnitRun run(const char* name, int p, int v, int m, int k) {
  return run(schedule::generate_schedule(name, {p, v, m, k}), v, k);
}

constexpr double kTol = 1e-9;

// GPipe and 1F1B: bubble (p-1)/(m+p-1) for every m; peak m for GPipe, p for 1F1B (m when m < p).
TEST(TextbookFormulas, GPipeAndOneFOneBAreExact) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const double bubble = (p - 1.0) / (m + p - 1.0);
      const UnitRun g = run("gpipe", p, 1, m, 1);
      EXPECT_NEAR(g.bubble, bubble, kTol) << "gpipe p=" << p << " m=" << m;
      EXPECT_NEAR(g.step, 3.0 * (m + p - 1), kTol);
      EXPECT_NEAR(g.peak, m, kTol);
      const UnitRun o = run("1f1b", p, 1, m, 1);
      EXPECT_NEAR(o.bubble, bubble, kTol) << "1f1b p=" << p << " m=" << m;
      EXPECT_NEAR(o.peak, std::min(p, m), kTol) << "1f1b p=" << p << " m=" << m;
    }
  }
}

// Seq1F1B: bubble (p-1)/(k*m+p-1) exactly for every m (equal-cost segments); peak
// (p+k-1)/k micro-batches once m*k >= p+k-1 (else all m*k units, m micro-batches).
TEST(TextbookFormulas, Seq1F1BIsExact) {
  for (int p = 1; p <= 8; ++p) {
    for (int k = 1; k <= 4; ++k) {
      for (int m = 1; m <= 16; ++m) {
        const UnitRun s = run("seq1f1b", p, 1, m, k);
        EXPECT_NEAR(s.bubble, (p - 1.0) / (k * m + p - 1.0), kTol) << "p=" << p << " k=" << k << " m=" << m;
        EXPECT_NEAR(s.peak, std::min(p + k - 1, m * k) / double(k), kTol) << "p=" << p << " k=" << k << " m=" << m;
      }
    }
  }
}

// Interleaved 1F1B and Seq1F1B-I. The textbook's (p-1)/(v*m) is bubble time over ideal time
// (Narayanan et al.); as a share of the step it is (p-1)/(v*k*m + p-1). Both hold exactly for
// every m >= G = ceil(p/k) (the smallest group). Peak p + (p-1)/v (k = 1) and
// ((v-1)p + 2(p-1) + k)/(v*k) hold exactly when k divides p and G divides m with m >= 2G; a
// remainder enlarges the first groups, and with them the warm-up and the peak (pinned below).
TEST(TextbookFormulas, InterleavedBubbleIsExactForWholeGroups) {
  int checked = 0;
  for (const char* name : {"interleaved", "seq1f1b-i"}) {
    const bool seq = std::string(name) == "seq1f1b-i";
    for (int p = 1; p <= 8; ++p) {
      for (int v = 2; v <= 3; ++v) {
        for (int k = 1; k <= (seq ? 4 : 1); ++k) {
          const int group = (p + k - 1) / k;
          for (int m = group; m <= 16; ++m) {
            const UnitRun r = run(name, p, v, m, k);
            const double ideal = 3.0 * m;
            EXPECT_NEAR((r.step - ideal) / ideal, (p - 1.0) / (v * k * m), kTol)
                << name << " p=" << p << " v=" << v << " k=" << k << " m=" << m;
            EXPECT_NEAR(r.bubble, (p - 1.0) / (v * k * m + p - 1.0), kTol);
            if (p % k == 0 && m % group == 0 && m >= 2 * group) {
              EXPECT_NEAR(r.peak, ((v - 1.0) * p + 2.0 * (p - 1) + k) / (v * k), kTol)
                  << name << " p=" << p << " v=" << v << " k=" << k << " m=" << m;
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * (100 + 461));  // v = 2 and 3
  // p = 4, v = 2: m = 8 reaches the formula's 4 + 3/2; m = 7 runs one group of 7 (peak 7),
  // m = 4 a single group whose warm-up covers every forward on rank 0 (peak 4).
  EXPECT_NEAR(run("interleaved", 4, 2, 8, 1).peak, 5.5, kTol);
  EXPECT_NEAR(run("interleaved", 4, 2, 7, 1).peak, 7.0, kTol);
  EXPECT_NEAR(run("interleaved", 4, 2, 4, 1).peak, 4.0, kTol);
}

// ZB-H1: bubble (p-1)/(3m+p-1) exactly once m >= p (bubble time (p-1)(F+B-W) = p-1), peak p.
// With m < p the drain is too short to hide the deferred W's: the step is 2p + 2m - 1
// (F and B chains across p ranks, 2 per further micro-batch, one final W).
TEST(TextbookFormulas, ZeroBubbleH1) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const UnitRun z = run("zb-h1", p, 1, m, 1);
      if (m >= p) {
        EXPECT_NEAR(z.bubble, (p - 1.0) / (3.0 * m + p - 1.0), kTol) << "p=" << p << " m=" << m;
        EXPECT_NEAR(z.peak, p, kTol);
      } else {
        EXPECT_NEAR(z.step, 2.0 * p + 2.0 * m - 1.0, kTol) << "p=" << p << " m=" << m;
        EXPECT_NEAR(z.peak, m, kTol);
      }
    }
  }
}

// seq-zb: (p-1)/(3km+p-1) once m*k >= p+k-1 (rank 0's warm-up plus one), below both Seq1F1B and
// ZB-H1; peak (p+k-1)/k like Seq1F1B. Short pipelines pinned: p = 4.
TEST(TextbookFormulas, SequenceZeroBubble) {
  for (int p = 1; p <= 8; ++p) {
    for (int k = 1; k <= 4; ++k) {
      for (int m = 1; m <= 16; ++m) {
        if (m * k < p + k - 1) continue;
        const UnitRun z = run("seq-zb", p, 1, m, k);
        EXPECT_NEAR(z.bubble, (p - 1.0) / (3.0 * k * m + p - 1.0), kTol) << "p=" << p << " k=" << k << " m=" << m;
        EXPECT_NEAR(z.peak, (p + k - 1.0) / k, kTol);
        EXPECT_LT(z.bubble, run("seq1f1b", p, 1, m, k).bubble + kTol);
      }
    }
  }
  EXPECT_NEAR(run("seq-zb", 4, 1, 1, 2).step, 6.0, kTol);
  EXPECT_NEAR(run("seq-zb", 4, 1, 2, 2).step, 8.0, kTol);
  EXPECT_NEAR(run("seq-zb", 4, 1, 1, 4).step, 4.5, kTol);
}

// ZB-V from plait's list scheduler: never below the lower bound 3m + (p-1)/2 (rank p-1 waits
// (p-1) half-model forwards for its first input), exactly on it when m = p, within 2 units of it
// for p <= 8, m <= 16, and never more than 1F1B's p micro-batches of activations.
TEST(TextbookFormulas, ZeroBubbleV) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const UnitRun z = run("zb-v", p, 2, m, 1);
      const double bound = 3.0 * m + (p - 1) / 2.0;
      EXPECT_GE(z.step, bound - kTol);
      if (m == p) {
        EXPECT_NEAR(z.step, bound, kTol) << "p=" << p;
      }
      if (m >= p) {
        EXPECT_LE(z.step, bound + 2.0) << "p=" << p << " m=" << m;
      }
      EXPECT_LE(z.peak, p + kTol);
    }
  }
  EXPECT_NEAR(run("zb-v", 8, 2, 16, 1).step, 51.5, kTol);
}

// Data parallelism: d independent replicas take exactly as long as one.
TEST(TextbookFormulas, ReplicasDoNotChangeTheStep) {
  for (const char* name : {"1f1b", "seq1f1b", "zb-v"}) {
    const schedule::ScheduleFamily& f = *schedule::find_schedule_family(name);
    const schedule::PipelineShape shape{4, f.fixed_chunks > 0 ? f.fixed_chunks : 1, 8, f.sequence_level ? 2 : 1};
    const schedule::Schedule one = schedule::generate_schedule(f, shape);
    const UnitRun a = run(one, shape.chunks, shape.segments);
    const UnitRun b = run(schedule::replicate(one, 3), shape.chunks, shape.segments);
    EXPECT_NEAR(a.step, b.step, kTol) << name;
    EXPECT_NEAR(a.bubble, b.bubble, kTol) << name;
  }
}

}  // namespace
}  // namespace plait::sim
