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
#include "plait/trace/event.h"

namespace plait::sim {
namespace {

struct UnitRun {
  double step = 0;
  double bubble = 0;
  double peak = 0;  // micro-batches of activations, worst rank
  // The controllable-memory paper's bubble rate (Qi et al., arXiv 2405.15362):
  // 1 - m(F+B+W) / (the longest time from a rank's first action's start to its last's end).
  double paper_bubble = 0;
};

UnitRun run(const schedule::Schedule& s, int v, int k) {
  const double unit = 1.0 / (k * v);
  const UniformCostModel cost(unit, unit, unit);
  const SimResult r = simulate(s, schedule::lower(s), cost, nullptr, {true, false});
  UnitRun out{r.step_time, r.bubble_fraction, 0, 0};
  for (const RankResult& rr : r.ranks) out.peak = std::max(out.peak, rr.peak_in_flight);
  std::vector<double> first(s.num_ranks(), r.step_time), last(s.num_ranks(), 0.0);
  for (const trace::Event& e : r.events) {
    if (!trace::is_compute(e.kind)) continue;
    first[e.rank] = std::min(first[e.rank], e.start);
    last[e.rank] = std::max(last[e.rank], e.end);
  }
  double span = 0;
  for (int rank = 0; rank < s.num_ranks(); ++rank) span = std::max(span, last[rank] - first[rank]);
  out.paper_bubble = 1.0 - 3.0 * s.layout.num_microbatches / span;
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

// Looped BFS (Lamy-Poirier, arXiv 2211.05953): GPipe over v chunks per rank. Once m*k >= p the
// first chunk's units come back around the ring before the next chunk needs them, and the bubble
// is exactly (p-1)/(v*k*m + p-1) of the step, interleaved 1F1B's; every micro-batch is in flight
// at the turn (GPipe's peak m).
TEST(TextbookFormulas, LoopedBfs) {
  int checked = 0;
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 3; ++v) {
      for (int k = 1; k <= 4; ++k) {
        for (int m = 1; m <= 16; ++m) {
          const UnitRun b = run("looped-bfs", p, v, m, k);
          EXPECT_NEAR(b.peak, m, kTol) << "p=" << p << " v=" << v << " k=" << k << " m=" << m;
          if (m * k < p) continue;
          EXPECT_NEAR(b.bubble, (p - 1.0) / (v * k * m + p - 1.0), kTol) << "p=" << p << " v=" << v << " k=" << k << " m=" << m;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 800);
}

// Interleaved zero bubble: interleaved 1F1B's order with B/W split and ZB-H1's deferral, so the
// bubble time falls from (p-1)(F+B+W)/v to (p-1)(F+B-W)/v: (p-1)/(3vkm + p-1) of the step, exactly
// once the groups are whole (G = ceil(p/k) divides m, m >= 2G); the peak stays interleaved 1F1B's.
TEST(TextbookFormulas, InterleavedZeroBubble) {
  int checked = 0;
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 3; ++v) {
      for (int k = 1; k <= 4; ++k) {
        const int G = (p + k - 1) / k;
        for (int m = 2 * G; m <= 16; m += G) {
          const UnitRun z = run("interleaved-zb", p, v, m, k);
          EXPECT_NEAR(z.bubble, (p - 1.0) / (3.0 * v * k * m + p - 1.0), kTol) << "p=" << p << " v=" << v << " k=" << k << " m=" << m;
          EXPECT_NEAR(z.peak, run(k == 1 ? "interleaved" : "seq1f1b-i", p, v, m, k).peak, kTol) << "p=" << p << " v=" << v << " k=" << k << " m=" << m;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// The controllable-memory V family (Qi et al., arXiv 2405.15362, its table of V-Min, V-Half,
// V-ZB). Peak activations in micro-batches exactly the paper's (p+4)//3, (p+2)//2 and p once the
// block repeats (m >= 2p), and (M + k - 1)/k with k segments (controllable_memory_v.h). The paper
// approximates the bubble by 2p/(3m) (V-Min) and p/(2m) (V-Half); plait's order, the repeated
// block squeezed by eager execution without the authors' greedy reorder of the ends, stays within
// 5% above that on p 2..8, m 2p..8p (worst ratio to the approximation measured: V-Min 0.82, V-Half
// 1.015 at p = 8, m = 64: 0.0634 against 0.0625), by either definition of the bubble: the
// simulator's idle share of ranks x step, and the paper's 1 - m(F+B+W) / longest rank span, which
// coincide for the block orders (every rank works 3m, and a rank spanning the whole step starts
// at 0). For V-ZB's list-scheduled order the paper's is the smaller (ranks start late), and its
// "about 0" is ZeroBubbleV's bound above.
TEST(TextbookFormulas, ControllableMemoryV) {
  struct Family {
    const char* name;
    int (*microbatches)(int p);
    double (*bubble)(int p, int m);
  };
  const Family families[] = {
      {"v-min", [](int p) { return (p + 4) / 3; }, [](int p, int m) { return 2.0 * p / (3.0 * m); }},
      {"v-half", [](int p) { return (p + 2) / 2; }, [](int p, int m) { return p / (2.0 * m); }},
      {"v-zb", [](int p) { return p; }, nullptr},
  };
  for (const Family& f : families) {
    double worst = 0;
    for (int p = 1; p <= 8; ++p) {
      for (int m = 2 * p; m <= 8 * p; m += p) {
        for (int k = 1; k <= 3; ++k) {
          const UnitRun r = run(f.name, p, 2, m, k);
          EXPECT_NEAR(r.peak, (f.microbatches(p) + k - 1.0) / k, kTol) << f.name << " p=" << p << " m=" << m << " k=" << k;
          if (f.bubble) {
            EXPECT_NEAR(r.paper_bubble, r.bubble, kTol) << f.name << " p=" << p << " m=" << m << " k=" << k;
          } else {
            EXPECT_LE(r.paper_bubble, r.bubble + kTol) << f.name << " p=" << p << " m=" << m << " k=" << k;
          }
          if (k == 1 && f.bubble && p >= 2) {
            EXPECT_LE(r.bubble, 1.05 * f.bubble(p, m)) << f.name << " p=" << p << " m=" << m;
            worst = std::max(worst, r.bubble / f.bubble(p, m));
          }
        }
      }
    }
    if (f.bubble) EXPECT_GT(worst, 0.8) << f.name;  // the approximation is close, not loose
  }
  // V-ZB is ZB-V: at k = 1 the same schedule (one_segment_twin), so ZeroBubbleV above is its test.
  EXPECT_NEAR(run("v-min", 8, 2, 64, 1).bubble, 13.5 / 205.5, kTol);
  EXPECT_NEAR(run("v-half", 8, 2, 64, 1).bubble, 13.0 / 205.0, kTol);
}

// DualPipeV (DeepSeek, dualpipev.py): its phase counts hold 2p chunk units after the warm-up and
// one more at each pair's forward, so p + 1/2 micro-batches on every rank (m >= 2p). No published
// bubble for CPU ranks (DeepSeek states it for the overlapped pair); with
// F = B = W and the pairs run in order it stays below 1F1B's (p-1)/(m+p-1).
TEST(TextbookFormulas, DualPipeV) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 2 * p; m <= 4 * p; ++m) {
      const UnitRun d = run("dualpipe-v", p, 2, m, 1);
      EXPECT_NEAR(d.peak, p + 0.5, kTol) << "p=" << p << " m=" << m;
      EXPECT_LE(d.bubble, (p - 1.0) / (m + p - 1.0) + kTol) << "p=" << p << " m=" << m;
    }
  }
}

// The simulator's unvalidated model of DualPipe's overlap (SimOptions::overlap_pairs): each pair's
// backward may run alongside its forward, so the step only shortens, the same work is done, and a
// rank is never busier than the step; off, the pairs run in order (the CPU runtime's behaviour).
TEST(TextbookFormulas, DualPipeVOverlapOnlyShortensTheStep) {
  const UniformCostModel cost(0.5, 0.5, 0.5);
  for (int p = 2; p <= 8; p += 2) {
    const schedule::Schedule s = schedule::generate_schedule("dualpipe-v", {p, 2, 3 * p, 1});
    const schedule::LoweredSchedule lowered = schedule::lower(s);
    SimOptions options{false, false};
    const SimResult in_order = simulate(s, lowered, cost, nullptr, options);
    options.overlap_pairs = true;
    const SimResult overlapped = simulate(s, lowered, cost, nullptr, options);
    EXPECT_LT(overlapped.step_time, in_order.step_time - 0.5) << "p=" << p;
    EXPECT_GE(overlapped.bubble_fraction, 0.0);
    for (int r = 0; r < p; ++r) {
      EXPECT_LE(overlapped.ranks[r].busy, overlapped.step_time + kTol);
      EXPECT_LE(overlapped.ranks[r].busy, in_order.ranks[r].busy + kTol);
    }
  }
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
