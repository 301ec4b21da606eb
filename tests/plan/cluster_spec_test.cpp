#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/plan/cluster_spec.h"
#include "plait/plan/device_profiles.h"
#include "plait/spec/model_presets.h"
#include "test_files.h"

namespace plait::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The shipped clusters read back as described in docs/planner.md.
TEST(ClusterSpec, ShippedClusters) {
  const ClusterSpec z = read_cluster_spec(shared_cluster("zorse-64gpu.json"));
  EXPECT_EQ(z.num_devices(), 64);
  EXPECT_EQ(z.machines.size(), 13u);
  EXPECT_EQ(z.precision, Precision::bf16);
  EXPECT_FALSE(z.emulated);
  int a100 = 0, t4 = 0;
  for (int d = 0; d < z.num_devices(); ++d) {
    a100 += z.type_of(d).name == "a100x40";
    t4 += z.type_of(d).name == "t4";
  }
  EXPECT_EQ(a100, 8);
  EXPECT_EQ(t4, 24);
  EXPECT_DOUBLE_EQ(z.type_of(0).memory_bytes, 40 * kGiB);
  // 25 Gb/s between machines, the machine's own link inside it.
  EXPECT_DOUBLE_EQ(z.link(0, 8).bandwidth_bytes_per_second, 25e9 / 8);
  EXPECT_DOUBLE_EQ(z.link(0, 1).bandwidth_bytes_per_second, 240e9);
  EXPECT_EQ(z.device_name(9), "a10g-0:1");

  const ClusterSpec c = read_cluster_spec(shared_cluster("cpu4-emulated.json"));
  EXPECT_EQ(c.num_devices(), 4);
  EXPECT_TRUE(c.emulated);
  EXPECT_EQ(c.precision, Precision::fp32);
  EXPECT_DOUBLE_EQ(c.type_of(3).slowdown, 12.0);
  EXPECT_LT(c.type_of(1).memory_bytes, c.type_of(0).memory_bytes);
  EXPECT_NE(c.type_of(0).profile.find("share/clusters/cpu4-profile.json"), std::string::npos);
}

// Per-pair links: a device pair beats a machine pair, which beats the defaults.
TEST(ClusterSpec, LinkOverrides) {
  const std::string path = write_test_file("links.json", R"({
    "device_types": {"x": {"tflops": 10, "memory_gib": 8}},
    "machine_link": {"gbyte_per_s": 50, "latency_us": 1},
    "machines": [{"name": "a", "devices": [{"type": "x", "count": 2}]},
                 {"name": "b", "devices": [{"type": "x", "count": 2}]},
                 {"name": "c", "devices": [{"type": "x"}], "link": {"gbit_per_s": 80, "latency_us": 2}}],
    "network": {"gbit_per_s": 10, "latency_us": 20},
    "links": [{"between": ["a", "b"], "gbit_per_s": 40, "latency_us": 10},
              {"between": ["a:1", "b:0"], "gbyte_per_s": 20, "latency_us": 3}]})");
  const ClusterSpec c = read_cluster_spec(path);
  EXPECT_DOUBLE_EQ(c.link(0, 1).bandwidth_bytes_per_second, 50e9);   // inside a
  EXPECT_DOUBLE_EQ(c.link(0, 2).bandwidth_bytes_per_second, 5e9);    // a-b machine override
  EXPECT_DOUBLE_EQ(c.link(1, 2).bandwidth_bytes_per_second, 20e9);   // a:1-b:0 device override
  EXPECT_DOUBLE_EQ(c.link(2, 1).bandwidth_bytes_per_second, 20e9);   // both directions
  EXPECT_DOUBLE_EQ(c.link(0, 4).bandwidth_bytes_per_second, 1.25e9); // a-c network
  EXPECT_DOUBLE_EQ(c.link(0, 4).latency_seconds, 20e-6);
  EXPECT_EQ(c.name, std::filesystem::path(path).stem().string());  // the file's stem by default
}

// A device type's fixed cost per action reaches its profile, slowed down like its compute.
TEST(ClusterSpec, ActionOverheadReachesTheProfile) {
  const std::string path = write_test_file("overhead.json", R"({
    "device_types": {"x": {"tflops": 10, "memory_gib": 8, "action_overhead_us": 25, "slowdown": 2}},
    "machines": [{"name": "a", "devices": [{"type": "x", "count": 2}], "link": {"gbyte_per_s": 50, "latency_us": 1}}]})");
  const ClusterSpec c = read_cluster_spec(path);
  EXPECT_DOUBLE_EQ(c.types[0].action_overhead_seconds, 25e-6);
  const auto profiles = resolve_type_profiles(c, spec::resolve_model("gpt-1.3b", 1024), 1024);
  EXPECT_DOUBLE_EQ(profiles[0].action_overhead_seconds, 50e-6);
}

std::string error_of(const std::string& text) {
  try {
    read_cluster_spec(write_test_file("bad.json", text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// Every mistake is one InputError naming the file and the field.
TEST(ClusterSpec, ErrorsNameFileAndField) {
  const std::string types = R"("device_types": {"x": {"tflops": 10, "memory_gib": 8}})";
  const std::string machine = R"("machines": [{"name": "m", "devices": [{"type": "x"}]}])";
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {"[]", "(top level): expected a JSON object"},
      {"{" + types + "}", "machines: missing"},
      {"{" + types + ", " + machine + ", \"colour\": 1}", "colour: unknown field"},
      {R"({"device_types": {"x": {"memory_gib": 8}}, )" + machine + "}", "device_types.x.profile: missing; expected a speed"},
      {R"({"device_types": {"x": {"tflops": 1, "profile": "zorse:t4", "memory_gib": 8}}, )" + machine + "}",
       "device_types.x.tflops: give one of profile and tflops"},
      {R"({"device_types": {"x": {"tflops": 1}}, )" + machine + "}", "device_types.x.memory_gib: missing"},
      {R"({"device_types": {"x": {"profile": "zorse:tpu", "memory_gib": 8}}, )" + machine + "}",
       "device_types.x.profile: no Zorse measurements for 'tpu'"},
      {R"({"device_types": {"x": {"profile": "nowhere.json", "memory_gib": 8}}, )" + machine + "}",
       "device_types.x.profile: 'nowhere.json' is neither zorse:<gpu> nor an existing latency file"},
      {R"({"device_types": {"x": {"tflops": 1, "memory_gib": 8, "slowdown": 0.5}}, )" + machine + "}",
       "device_types.x.slowdown: expected a slow-down factor >= 1"},
      {R"({"device_types": {"x": {"tflops": 1, "memory_gib": 8, "action_overhead_us": -1}}, )" + machine + "}",
       "device_types.x.action_overhead_us: expected microseconds >= 0"},
      {"{" + types + R"(, "machines": [{"name": "m", "devices": [{"type": "y"}]}]})",
       "machines[0].devices[0].type: unknown device type 'y'; device_types has x"},
      {"{" + types + R"(, "machines": [{"name": "m", "devices": [{"type": "x", "count": 2}]}]})",
       "machines[0].link: missing"},
      {"{" + types + R"(, "machines": [{"name": "m", "devices": [{"type": "x"}]}, {"name": "m", "devices": [{"type": "x"}]}]})",
       "machines[1].name: machine 'm' is listed twice"},
      {"{" + types + R"(, "machines": [{"name": "m", "devices": [{"type": "x"}]}, {"name": "n", "devices": [{"type": "x"}]}]})",
       "network: missing"},
      {"{" + types + ", " + machine + R"(, "machine_link": {"gbit_per_s": 1, "gbyte_per_s": 1, "latency_us": 1}})",
       "machine_link.gbyte_per_s: give one of gbit_per_s and gbyte_per_s"},
      {"{" + types + ", " + machine + R"(, "machine_link": {"gbit_per_s": -1, "latency_us": 1}})",
       "machine_link.gbit_per_s: expected a positive bandwidth"},
      {"{" + types + ", " + machine + R"(, "links": [{"between": ["m", "q"], "gbit_per_s": 1, "latency_us": 1}]})",
       "links[0].between: unknown machine in 'q'"},
      {"{" + types + ", " + machine + R"(, "links": [{"between": ["m:0", "m:3"], "gbit_per_s": 1, "latency_us": 1}]})",
       "links[0].between: machine m has 1 devices; 'm:3' is not one of them"},
      {"{" + types + ", " + machine + R"(, "precision": "fp8"})", "precision: expected \"mixed16\" (or \"bf16\") or \"fp32\""},
      {"{" + types + ", " + machine + R"(, "precision": "fp32", "grad_reduce": "bf16"})",
       "grad_reduce: \"bf16\" needs precision \"mixed16\" (found \"fp32\")"},
      {"{" + types + ", " + machine + R"(, "grad_reduce": "fp8"})", "grad_reduce: expected \"fp32\" or \"bf16\", found \"fp8\""},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.text);
    EXPECT_NE(error.find("bad.json: " + c.expected), std::string::npos) << "got: " << error << "\nfor: " << c.text;
  }
}

}  // namespace
}  // namespace plait::plan
