#include <gtest/gtest.h>

#include <algorithm>

#include "plait/plan/cluster_spec.h"
#include "plait/plan/stage_grouping.h"
#include "test_files.h"

namespace plait::plan {
namespace {

std::vector<int> all_devices(const ClusterSpec& c) {
  std::vector<int> d(c.num_devices());
  for (int i = 0; i < c.num_devices(); ++i) d[i] = i;
  return d;
}

// Islands are the machines of an Ethernet cluster; on one machine with uniform links, single
// devices; an NVLink pair inside a PCIe machine stays together.
TEST(StageGrouping, BandwidthIslands) {
  const ClusterSpec z = read_cluster_spec(shared_cluster("zorse-64gpu.json"));
  const auto islands = bandwidth_islands(z, all_devices(z));
  ASSERT_EQ(islands.size(), 13u);
  for (const auto& island : islands) {
    for (int d : island) EXPECT_EQ(z.devices[d].machine, z.devices[island[0]].machine);
  }
  const ClusterSpec c = read_cluster_spec(shared_cluster("cpu4-emulated.json"));
  EXPECT_EQ(bandwidth_islands(c, all_devices(c)), (std::vector<std::vector<int>>{{0}, {1}, {2}, {3}}));
  const ClusterSpec pairs = read_cluster_spec(write_test_file("pairs.json", R"({
    "device_types": {"x": {"tflops": 10, "memory_gib": 8}},
    "machines": [{"name": "m", "devices": [{"type": "x", "count": 4}], "link": {"gbyte_per_s": 16, "latency_us": 5}}],
    "links": [{"between": ["m:0", "m:1"], "gbyte_per_s": 300, "latency_us": 2},
              {"between": ["m:2", "m:3"], "gbyte_per_s": 300, "latency_us": 2}]})"));
  EXPECT_EQ(bandwidth_islands(pairs, all_devices(pairs)), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
}

// The candidates keep islands whole until more stages are asked for, include one stage per
// machine of each type, cover every ordered partition of a small cluster, and order stages by
// their smallest memory (largest first) or the reverse.
TEST(StageGrouping, Candidates) {
  const ClusterSpec z = read_cluster_spec(shared_cluster("zorse-64gpu.json"));
  const std::vector<double> speed(z.num_devices(), 1.0);
  const auto groupings = stage_groupings(z, all_devices(z), speed, 16);
  bool per_machine = false;
  for (const Grouping& g : groupings) {
    EXPECT_LE(g.size(), 16u);
    std::vector<int> seen;
    for (const auto& group : g) seen.insert(seen.end(), group.begin(), group.end());
    std::sort(seen.begin(), seen.end());
    EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end()) == seen.end()) << "a device in two stages";
    if (g.size() == 13) {
      per_machine = per_machine || std::all_of(g.begin(), g.end(), [&](const auto& group) {
                      return std::all_of(group.begin(), group.end(), [&](int d) {
                        return z.devices[d].machine == z.devices[group[0]].machine;
                      }) && group.size() == z.machines[z.devices[group[0]].machine].devices.size();
                    });
    }
  }
  EXPECT_TRUE(per_machine);
  const ClusterSpec c = read_cluster_spec(shared_cluster("cpu4-emulated.json"));
  const auto small = stage_groupings(c, all_devices(c), std::vector<double>(4, 1.0), 16);
  // Ordered set partitions of 4 islands (Fubini number 75).
  EXPECT_GE(small.size(), 75u);
  // Memory order: the 40 GiB A100s lead, the 16 GiB devices come last.
  const Grouping ordered = order_groups(z, {{40, 41, 42, 43}, {0, 1, 2, 3}, {8, 9, 10, 11}});
  EXPECT_EQ(ordered[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ordered[2], (std::vector<int>{40, 41, 42, 43}));
}

}  // namespace
}  // namespace plait::plan
