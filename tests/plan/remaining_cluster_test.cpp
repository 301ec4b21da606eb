// The cluster that remains after a lost device (remaining_cluster.h) and the re-plan of a job on
// it (replan.h), as plait launch uses them: devices keep their names, links keep their
// overrides, an emptied machine goes; the re-plan keeps the job's model, sequence length,
// micro-batch size and global batch, and carries every other section of its config.
#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/plan/remaining_cluster.h"
#include "plait/plan/replan.h"
#include "test_files.h"

namespace plait::plan {
namespace {

ClusterSpec two_machines() {
  return parse_cluster_spec(nlohmann::json::parse(R"({
    "precision": "fp32", "emulated": true,
    "device_types": {"fast": {"tflops": 0.02, "memory_gib": 1}, "slow": {"tflops": 0.01, "memory_gib": 1}},
    "machines": [{"name": "a", "devices": [{"type": "fast", "count": 3}], "link": {"gbyte_per_s": 4, "latency_us": 5}},
                 {"name": "b", "devices": [{"type": "slow"}]}],
    "network": {"gbyte_per_s": 1, "latency_us": 30},
    "links": [{"between": ["a:1", "a:2"], "gbyte_per_s": 2, "latency_us": 1},
              {"between": ["a", "b"], "gbyte_per_s": 0.5, "latency_us": 50}]})"),
                            "two.json");
}

TEST(RemainingCluster, DevicesKeepTheirNamesAndLinks) {
  const ClusterSpec c = two_machines();
  const ClusterSpec r = without_device(c, find_device(c, "a:0"));
  ASSERT_EQ(r.num_devices(), 3);
  EXPECT_EQ(r.device_name(0), "a:1");
  EXPECT_EQ(r.device_name(1), "a:2");
  EXPECT_EQ(r.device_name(2), "b:0");
  EXPECT_EQ(find_device(r, "a:0"), -1);
  EXPECT_EQ(find_device(r, "a:2"), 1);
  EXPECT_DOUBLE_EQ(r.link(0, 1).bandwidth_bytes_per_second, 2e9);    // the device pair's override
  EXPECT_DOUBLE_EQ(r.link(1, 2).bandwidth_bytes_per_second, 0.5e9);  // the machine pair's
  EXPECT_EQ(r.type_of(2).name, "slow");

  // a:2 lost: the device pair's override goes with it.
  const ClusterSpec r2 = without_device(r, find_device(r, "a:2"));
  ASSERT_EQ(r2.num_devices(), 2);
  EXPECT_EQ(r2.overrides.size(), 1u);
  EXPECT_DOUBLE_EQ(r2.link(0, 1).bandwidth_bytes_per_second, 0.5e9);
}

TEST(RemainingCluster, AnEmptiedMachineGoesWithItsOverrides) {
  const ClusterSpec c = two_machines();
  const ClusterSpec r = without_device(c, find_device(c, "b:0"));
  ASSERT_EQ(r.num_devices(), 3);
  ASSERT_EQ(r.machines.size(), 1u);
  EXPECT_EQ(r.machines[0].devices, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r.overrides.size(), 1u);  // a:1-a:2 only
  EXPECT_THROW(without_device(without_device(without_device(r, 0), 0), 0), Error);  // the last one
}

TEST(Replan, KeepsTheJobsBatchAndCarriesItsSections) {
  const ClusterSpec c = two_machines();
  const nlohmann::json config = nlohmann::json::parse(R"({
    "model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
    "train": {"steps": 40, "lr": 0.003, "warmup_steps": 5, "seq": 32, "microbatch_size": 2, "microbatches": 4},
    "data": {"shards": "data/x", "tokenizer": "byte"},
    "checkpoint": {"dir": "ckpt/run", "every": 2},
    "stragglers": {"window": 8},
    "parallel": {"pp": 2}})");
  JobShape job;
  job.model.name = "job";
  job.model.model = spec::gpt2_model(4, 32, 4, 256, 32);
  job.seq = 32;
  job.microbatch_size = 2;
  job.microbatches = 4;
  const Replan r = replan_job(config, without_device(c, find_device(c, "a:1")), job);
  const nlohmann::json& t = r.config["train"];
  EXPECT_EQ(t["microbatch_size"], 2);
  EXPECT_EQ(t["microbatches"], 4);
  EXPECT_EQ(t["seq"], 32);
  EXPECT_EQ(t["steps"], 40);
  EXPECT_EQ(t["warmup_steps"], 5);
  EXPECT_EQ(r.config["checkpoint"], config["checkpoint"]);
  EXPECT_EQ(r.config["data"], config["data"]);
  EXPECT_EQ(r.config["stragglers"], config["stragglers"]);
  EXPECT_EQ(r.config["model"]["layers"], 4);
  const nlohmann::json& devices = r.config["parallel"]["cluster_devices"];
  EXPECT_EQ(static_cast<int>(devices.size()), r.ranks);
  for (const auto& d : devices) EXPECT_NE(d.get<std::string>(), "a:1");
  EXPECT_FALSE(r.config["parallel"].contains("pp"));  // the plan's explicit layout

  // A device type left without devices (b:0 was the only slow one) plans on the others.
  const Replan fast_only = replan_job(config, without_device(c, find_device(c, "b:0")), job);
  for (const auto& d : fast_only.config["parallel"]["cluster_devices"]) EXPECT_EQ(d.get<std::string>().substr(0, 2), "a:");
  EXPECT_EQ(fast_only.config["train"]["microbatches"], 4);
}

// The degrees a re-plan tries: plait plan's default for the cluster (1 on an emulated one, whose
// TP is opt-in; 1, 2, 4, 8 on a real one) and the degrees the job ran with, so a job planned with
// --tp 2 on an emulated cluster may keep its TP after a lost device.
TEST(Replan, TriesTheClustersDefaultDegreesAndTheJobsOwn) {
  ClusterSpec c = two_machines();
  JobShape job;
  EXPECT_EQ(replan_tensor_parallel(c, job), (std::vector<int>{1}));
  job.tensor_parallel = {2, 2, 1, 2};
  EXPECT_EQ(replan_tensor_parallel(c, job), (std::vector<int>{1, 2}));
  c.emulated = false;
  EXPECT_EQ(replan_tensor_parallel(c, job), (std::vector<int>{1, 2, 4, 8}));
  job.tensor_parallel.clear();
  EXPECT_EQ(replan_tensor_parallel(c, job), (std::vector<int>{1, 2, 4, 8}));
}

}  // namespace
}  // namespace plait::plan
