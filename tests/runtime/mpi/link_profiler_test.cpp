// `plait profile links` measures every pair of ranks and every group's collectives (behaviour,
// not speed: what is measured, that each figure is a positive time or rate, and that the link
// form reads back as a cluster whose links are the measured ones).
#include "plait/runtime/link_profiler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "mpi_test_session.h"
#include "plait/core/error.h"
#include "plait/plan/cluster_spec.h"
#include "plait/plan/measured_links.h"

namespace plait::runtime {
namespace {

comm::Communicator& world() { return plait::test::mpi_session().world(); }

LinkProbeOptions small() {
  LinkProbeOptions o;
  // Sizes far enough apart that a descheduled trip (ranks share 2 cores) cannot invert the line;
  // the median of 5 trips drops up to 2 of them.
  o.sizes = {4, 64 << 10, 1 << 20};
  o.trips = 5;
  return o;
}

TEST(LinkProfiler, MeasuresEveryPairAndGroup) {
  const int n = world().size();
  LinkProbeOptions o = small();
  std::vector<int> everyone;
  for (int r = n - 1; r >= 0; --r) everyone.push_back(r);
  if (n >= 3) o.groups = {{2, 0}, {1, n - 1}, everyone};
  const LinkMeasurements m = measure_links(world(), "node", o);
  ASSERT_EQ(m.hosts, std::vector<std::string>(static_cast<std::size_t>(n), "node"));
  ASSERT_EQ(m.pairs.size(), static_cast<std::size_t>(n * (n - 1) / 2));
  std::size_t i = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b, ++i) {
      const MeasuredPair& p = m.pairs[i];
      EXPECT_EQ(p.a, a);
      EXPECT_EQ(p.b, b);
      ASSERT_EQ(p.one_way_seconds.size(), 3u);
      for (double t : p.one_way_seconds) EXPECT_GT(t, 0);
      EXPECT_EQ(p.link.latency_seconds, p.one_way_seconds[0]);
      EXPECT_GT(p.link.bandwidth_bytes_per_second, 0);
      EXPECT_TRUE(std::isfinite(p.link.bandwidth_bytes_per_second));
    }
  }
  // The job, and the groups asked for (one host: no host groups; a repeated group once).
  ASSERT_EQ(m.collectives.size(), n >= 3 ? 3u : 1u);
  EXPECT_EQ(m.collectives[0].what, "job");
  EXPECT_EQ(m.collectives[0].ranks.size(), static_cast<std::size_t>(n));
  if (n >= 3) {
    EXPECT_EQ(m.collectives[1].ranks, (std::vector<int>{0, 2}));
  }
  if (n >= 3) {
    EXPECT_EQ(m.collectives[2].ranks, (std::vector<int>{1, n - 1}));
  }
  for (const MeasuredCollective& c : m.collectives) {
    for (const auto* times : {&c.allreduce_seconds, &c.reduce_scatter_seconds}) {
      ASSERT_EQ(times->size(), 3u);
      for (double t : *times) EXPECT_GT(t, 0);
    }
    EXPECT_GT(c.allreduce.bandwidth_bytes_per_second, 0);
    EXPECT_GT(c.reduce_scatter.bandwidth_bytes_per_second, 0);
  }

  // The link form is a cluster file once it has device types; its links are the measured ones.
  std::vector<plan::MeasuredLink> links;
  for (const MeasuredPair& p : m.pairs) links.push_back({p.a, p.b, p.link});
  nlohmann::json doc = plan::measured_links_json(m.hosts, links);
  doc["device_types"] = {{"host", {{"tflops", 1.0}, {"memory_gib", 1.0}}}};
  const plan::ClusterSpec cluster = plan::parse_cluster_spec(doc, "links.json");
  ASSERT_EQ(cluster.num_devices(), n);
  ASSERT_EQ(cluster.machines.size(), 1u);
  for (const MeasuredPair& p : m.pairs) {
    for (const auto& [x, y] : {std::pair{p.a, p.b}, std::pair{p.b, p.a}}) {
      const sim::LinkProfile& l = cluster.link(x, y);
      EXPECT_NEAR(l.latency_seconds, p.link.latency_seconds, 1e-3 * p.link.latency_seconds);
      EXPECT_NEAR(l.bandwidth_bytes_per_second, p.link.bandwidth_bytes_per_second,
                  1e-3 * p.link.bandwidth_bytes_per_second);
    }
  }
}

// The alpha-beta line: latency the smallest message's time, bandwidth the inverse slope; times
// that do not grow with the bytes fall back to the largest message's average rate.
TEST(LinkProfiler, AlphaBetaLine) {
  const sim::LinkProfile l = alpha_beta({100, 1100, 2100}, {2e-6, 3e-6, 4e-6});
  EXPECT_DOUBLE_EQ(l.latency_seconds, 2e-6);
  EXPECT_NEAR(l.bandwidth_bytes_per_second, 1e9, 1e-3);
  const sim::LinkProfile noisy = alpha_beta({100, 1100, 2100}, {9e-6, 3e-6, 4e-6});
  EXPECT_DOUBLE_EQ(noisy.bandwidth_bytes_per_second, 2100 / 4e-6);
}

TEST(LinkProfiler, RefusesGroupsOutsideTheJobOnEveryRank) {
  LinkProbeOptions o = small();
  o.groups = {{0, world().size()}};
  EXPECT_THROW(measure_links(world(), "node", o), Error);
  o = small();
  o.sizes = {1 << 20, 4};
  EXPECT_THROW(measure_links(world(), "node", o), Error);
}

}  // namespace
}  // namespace plait::runtime
