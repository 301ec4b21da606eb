#include <gtest/gtest.h>

#include <string>

#include "plait/schedule/generators.h"
#include "plait/schedule/grouped_interleaving.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/schedule_text.h"
#include "plait/schedule/validator.h"

namespace plait::schedule {
namespace {

// Every family, on every shape it accepts in the acceptance grid p 1..8, m 1..16, k 1..4,
// v 1..2, produces a schedule that validates (including the blocking send/recv deadlock check).
TEST(Generators, EveryFamilyValidatesOnTheGrid) {
  int generated = 0;
  for (const ScheduleFamily& family : schedule_families()) {
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
  // 3 sequence-level families x 512 shapes + 5 micro-batch families x 128 shapes.
  EXPECT_EQ(generated, 3 * 512 + 5 * 128);
}

}  // namespace
}  // namespace plait::schedule
