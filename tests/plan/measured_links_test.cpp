// The link form of measured links: machines by host in the order of their first rank, each
// rank a device "host:index", the median pair inside a host as its link, the median between hosts
// as the network, every pair as an override; it reads back as a cluster with those links.
#include "plait/plan/measured_links.h"

#include <gtest/gtest.h>

#include "plait/plan/cluster_spec.h"

namespace plait::plan {
namespace {

sim::LinkProfile link(double latency_us, double gbyte_per_s) {
  sim::LinkProfile l;
  l.latency_seconds = latency_us * 1e-6;
  l.bandwidth_bytes_per_second = gbyte_per_s * 1e9;
  return l;
}

TEST(MeasuredLinks, HostsBecomeMachinesAndPairsOverrides) {
  // Ranks 0 and 2 on host a, ranks 1 and 3 on host b.
  const std::vector<std::string> hosts = {"a", "b", "a", "b"};
  EXPECT_EQ(measured_device_names(hosts), (std::vector<std::string>{"a:0", "b:0", "a:1", "b:1"}));
  const std::vector<MeasuredLink> pairs = {{0, 1, link(20, 1)}, {0, 2, link(2, 10)}, {0, 3, link(30, 2)},
                                           {1, 2, link(40, 3)}, {1, 3, link(4, 20)}, {2, 3, link(50, 4)}};
  nlohmann::json doc = measured_links_json(hosts, pairs, "cpu");
  ASSERT_EQ(doc["machines"].size(), 2u);
  EXPECT_EQ(doc["machines"][0]["name"], "a");
  EXPECT_EQ(doc["machines"][0]["devices"][0]["count"], 2);
  EXPECT_EQ(doc["machines"][0]["devices"][0]["type"], "cpu");
  EXPECT_EQ(doc["machines"][0]["link"]["latency_us"], 2.0);
  EXPECT_EQ(doc["machines"][1]["link"]["gbyte_per_s"], 20.0);
  // Between hosts: pairs (0,1), (0,3), (1,2), (2,3): median latency 35 us, bandwidth 2.5 GB/s.
  EXPECT_EQ(doc["network"]["latency_us"], 35.0);
  EXPECT_EQ(doc["network"]["gbyte_per_s"], 2.5);
  ASSERT_EQ(doc["links"].size(), 6u);
  EXPECT_EQ(doc["links"][3]["between"], (nlohmann::json{"b:0", "a:1"}));

  doc["device_types"] = {{"cpu", {{"tflops", 1.0}, {"memory_gib", 2.0}}}};
  const ClusterSpec c = parse_cluster_spec(doc, "links.json");
  ASSERT_EQ(c.num_devices(), 4);
  // Devices are numbered machine by machine: a:0, a:1, b:0, b:1 = ranks 0, 2, 1, 3.
  const int device_of_rank[4] = {0, 2, 1, 3};
  for (const MeasuredLink& p : pairs) {
    const sim::LinkProfile& l = c.link(device_of_rank[p.a], device_of_rank[p.b]);
    EXPECT_DOUBLE_EQ(l.latency_seconds, p.link.latency_seconds) << p.a << "-" << p.b;
    EXPECT_DOUBLE_EQ(l.bandwidth_bytes_per_second, p.link.bandwidth_bytes_per_second) << p.a << "-" << p.b;
  }
}

TEST(MeasuredLinks, FiguresKeepFourSignificantDigits) {
  const nlohmann::json j = link_json(link(1.234567, 12.345678));
  EXPECT_EQ(j["latency_us"], 1.235);
  EXPECT_EQ(j["gbyte_per_s"], 12.35);
}

}  // namespace
}  // namespace plait::plan
