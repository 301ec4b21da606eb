// `plait launch` end to end (docs/runtime.md, "Lost ranks: plait launch"): a job planned by
// `plait plan` for an emulated cluster of 4 devices (2 fast, 2 slow; a 4-layer model of hidden 32,
// 8 steps, a checkpoint every 2) loses a rank, and plait launch finishes it on the 3 devices that
// remain:
//
// - rank 3 SIGKILLed in step 5: re-planned without host:3, resumed from step 4;
// - rank 1 SIGKILLed during the save of step 4 (after writing its files, before the commit):
//   re-planned without host:1, resumed from step 2 (the save it interrupted is not a checkpoint);
//
// each time the final checkpoint's tensors equal, bit for bit, those of `plait train` run
// separately on 3 ranks with the plan launch wrote, from the checkpoint it resumed; the time from
// the failure notice to the first new step is printed. The restart budget is honoured (two losses
// restarted, on 3 and then 2 devices, the third reported and not restarted), a preempted job's 75
// is passed on, and a rank lost before the first checkpoint is one error.
//
// The cluster is share/clusters/cpu4-emulated.json's shape (two device types, one machine) with
// speeds given as TFLOP/s: the shipped cpu4 clusters are profiled for cpu4-base.json's model
// (8 layers of hidden 128 at 256 tokens), whose steps take seconds on these cores.
#include "train_cli_fixture.h"

namespace {

using namespace plait_train_cli;

class LaunchCli : public TrainCheckpointCli {
 protected:
  void SetUp() override {
    TrainCheckpointCli::SetUp();
    // What tests/mpi/run_mpi_test.sh gives every rank (mpirun -x passes them on).
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
    std::ofstream(dir_ / "cluster.json") << R"({"name": "cpu4-tiny", "precision": "fp32", "emulated": true,
 "device_types": {"fast": {"tflops": 0.02, "memory_gib": 1}, "slow": {"tflops": 0.01, "memory_gib": 1}},
 "machines": [{"name": "host", "devices": [{"type": "fast", "count": 2}, {"type": "slow", "count": 2}],
               "link": {"gbyte_per_s": 4, "latency_us": 5}}]})";
    std::ofstream(dir_ / "base.json") << R"({"model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
 "train": {"steps": 8, "lr": 0.003, "eps": 0.001},
 "data": {"shards": ")" + (dir_ / "shards").string() + R"(", "tokenizer": "byte"},
 "checkpoint": {"dir": ")" + (dir_ / "ckpt").string() + R"(", "every": 2}})";
    const Result planned = plait("plan --cluster " + (dir_ / "cluster.json").string() + " --model " +
                                 (dir_ / "base.json").string() + " --config " + (dir_ / "base.json").string() +
                                 " --global-batch 8 --seq 32 --out " + (dir_ / "plan.json").string());
    ASSERT_EQ(planned.status, 0) << planned.err;
    const nlohmann::json plan = nlohmann::json::parse(slurp(dir_ / "plan.json"));
    ASSERT_EQ(plan["parallel"]["cluster_devices"].size(), 4u) << plan.dump();
    ASSERT_EQ(plan["checkpoint"]["every"], 2);  // plait plan carries the base's checkpoint section
  }

  Result launch(const std::string& args, const std::string& config = "plan.json") {
    std::string mpirun_args = "--oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS";
    if (::geteuid() == 0) mpirun_args += " --allow-run-as-root";
    return shell("timeout 120 " PLAIT_BINARY " launch --cluster " + (dir_ / "cluster.json").string() + " --config " +
                 (dir_ / config).string() + " --mpirun-args '" + mpirun_args + "' " + args);
  }

  // The cluster devices a plan's MPI ranks run on, in rank order: each schedule rank's TP group
  // is `tp` consecutive devices from its parallel.cluster_devices entry ("host:<i>").
  static std::vector<std::string> job_devices(const nlohmann::json& plan) {
    const nlohmann::json& p = plan["parallel"];
    std::vector<std::string> out;
    for (std::size_t r = 0; r < p["cluster_devices"].size(); ++r) {
      const std::string lead = p["cluster_devices"][r];
      int t = 1;
      if (p.contains("tp")) {
        const std::size_t v = p["rank_vstages"][r][0].get<std::size_t>();
        t = p["tp"].size() == 1 ? p["tp"][0].get<int>() : p["tp"][v].get<int>();
      }
      const int first = std::stoi(lead.substr(lead.find(':') + 1));
      for (int i = 0; i < t; ++i) out.push_back("host:" + std::to_string(first + i));
    }
    return out;
  }

  // The plan launch wrote, <stem>.without-<lost>.json, must run on `ranks` MPI ranks (0: any),
  // none of them on `lost`; `plait train` run separately with it from `resumed` must end with the
  // same tensors as the launched job.
  void expect_finished_as_its_plan_runs(const Result& r, const std::string& lost, int resumed, std::size_t ranks,
                                        const std::string& stem = "plan") {
    const std::string without = stem + ".without-" + lost + ".json";
    ASSERT_TRUE(fs::exists(dir_ / without)) << r.err;
    nlohmann::json plan = nlohmann::json::parse(slurp(dir_ / without));
    const std::vector<std::string> devices = job_devices(plan);
    if (ranks > 0) EXPECT_EQ(devices.size(), ranks);
    std::string colon = lost;
    colon[colon.find('-')] = ':';
    for (const std::string& d : devices) EXPECT_NE(d, colon);
    EXPECT_NE(r.err.find("plait launch: finished on " + std::to_string(devices.size()) + " rank(s)"), std::string::npos)
        << r.err;
    EXPECT_EQ(plan["train"]["steps"], 8);  // the learning-rate schedule's length
    EXPECT_EQ(plan["train"]["microbatch_size"].get<int>() * plan["train"]["microbatches"].get<int>(), 8);

    char step_dir[32];
    std::snprintf(step_dir, sizeof step_dir, "step_%08d", resumed);
    plan["checkpoint"]["dir"] = (dir_ / "reference.ckpt").string();
    std::ofstream(dir_ / "reference.json") << plan.dump(2);
    const Result ref = train(static_cast<int>(devices.size()), "--config " + (dir_ / "reference.json").string() +
                                                                  " --resume " + (dir_ / "ckpt" / step_dir).string());
    ASSERT_EQ(job_status(ref).first, 0) << ref.err;
    std::size_t compared = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "reference.ckpt" / "step_00000008")) {
      if (e.path().extension() != ".safetensors") continue;
      EXPECT_EQ(slurp(e.path()), slurp(dir_ / "ckpt" / "step_00000008" / e.path().filename())) << e.path();
      ++compared;
    }
    EXPECT_GE(compared, 1u);
  }
};

TEST_F(LaunchCli, ARankKilledMidRunFinishesOnTheThreeThatRemain) {
  const Result r = launch("--restarts 1 --inject-failure 3:5:kill");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 1 of 1: rank 3 lost (mpirun: exited on signal 9) on device host:3 (slow)"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step_00000004 (step 4, the newest that verifies); tokens lost: 1 step(s) x 256 tokens = 256"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 1: first new step (step 4) done "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait launch: finished on 3 rank(s) after 1 restart(s)"), std::string::npos) << r.err;
  expect_finished_as_its_plan_runs(r, "host-3", 4, 3);
}

TEST_F(LaunchCli, ARankKilledDuringASaveFinishesFromThePreviousCheckpoint) {
  const Result r = launch("--restarts 2 --inject-failure 1:4:kill-in-save");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 1 of 2: rank 1 lost (mpirun: exited on signal 9) on device host:1"),
            std::string::npos) << r.err;
  // Steps 2 and 3 were done; the save of step 4 never committed.
  EXPECT_NE(r.err.find("step_00000002 (step 2, the newest that verifies); tokens lost: 2 step(s) x 256 tokens = 512"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 1: first new step (step 2) done "), std::string::npos) << r.err;
  expect_finished_as_its_plan_runs(r, "host-1", 2, 3);
}

// A tensor-parallel plan (plait plan --tp 2: two ranks of TP 2, the fast pair and the slow pair)
// runs on 4 MPI ranks, the sum of its ranks' degrees; MPI rank 1, TP rank 1 of schedule rank 0,
// is lost in step 5, and its device is host:1, the second of its group's (not cluster_devices[1],
// the slow pair's first). The re-plan may keep TP 2 (the job's degree) on the 3 that remain.
TEST_F(LaunchCli, ATensorParallelJobLosesOneDeviceOfAGroupAndFinishesWithoutIt) {
  const Result planned = plait("plan --cluster " + (dir_ / "cluster.json").string() + " --model " +
                               (dir_ / "base.json").string() + " --config " + (dir_ / "base.json").string() +
                               " --global-batch 8 --seq 32 --tp 2 --out " + (dir_ / "plan-tp.json").string());
  ASSERT_EQ(planned.status, 0) << planned.err;
  const nlohmann::json tp_plan = nlohmann::json::parse(slurp(dir_ / "plan-tp.json"));
  ASSERT_EQ(job_devices(tp_plan), (std::vector<std::string>{"host:0", "host:1", "host:2", "host:3"})) << tp_plan.dump();
  ASSERT_EQ(tp_plan["parallel"]["cluster_devices"].size(), 2u) << tp_plan.dump();

  const Result r = launch("--restarts 1 --inject-failure 1:5:kill", "plan-tp.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("plait launch: starting: mpirun -np 4 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 1 of 1: rank 1 lost (mpirun: exited on signal 9) on device host:1 (fast)"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step_00000004 (step 4, the newest that verifies)"), std::string::npos) << r.err;
  expect_finished_as_its_plan_runs(r, "host-1", 4, 0, "plan-tp");
}

// --restarts 2: the first loss (host:3 in step 5) is restarted on 3 devices, the second (rank 0
// of that job, host:0, in step 6) on the 2 that remain, the plan named after both; the third
// (rank 1 there, in step 7) is reported with the spent budget and not restarted.
TEST_F(LaunchCli, TheRestartBudgetIsHonoured) {
  const Result r = launch("--restarts 2 --inject-failure 3:5:kill --inject-failure 0:6:kill --inject-failure 1:7:kill");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 1 of 2: rank 3 lost (mpirun: exited on signal 9) on device host:3"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 2 of 2: rank 0 lost (mpirun: exited on signal 9) on device host:0"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step_00000006 (step 6, the newest that verifies)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait launch: restart 2: first new step (step 6) done "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plait: error: rank 1 was lost (exit status 137), and the restart budget is spent "
                       "(--restarts 2, 2 used): not restarted"),
            std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "plait launch: starting:"), 3u) << r.err;
  ASSERT_TRUE(fs::exists(dir_ / "plan.without-host-3-host-0.json"));
  const nlohmann::json plan = nlohmann::json::parse(slurp(dir_ / "plan.without-host-3-host-0.json"));
  EXPECT_EQ(plan["parallel"]["cluster_devices"], nlohmann::json::parse(R"(["host:1", "host:2"])"));
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "step_00000008"));
}

// A stop signal (here rank 1 sending itself SIGTERM in step 3) is a preemption: the job saves and
// exits 75, which launch passes on without a restart.
TEST_F(LaunchCli, APreemptedJobIsPassedOnNotRestarted) {
  const Result r = launch("--restarts 1 --inject-failure 1:3:sigterm");
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find("plait launch: the job stopped with exit status 75 (preempted: saved; continue with plait "
                       "launch --resume): passed on, not restarted"),
            std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "plait launch: starting:"), 1u) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "step_00000004"));
}

TEST_F(LaunchCli, ARankLostBeforeTheFirstCheckpointIsOneError) {
  const Result r = launch("--restarts 1 --inject-failure 0:1:kill");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("plait: error: no verified checkpoint in " + (dir_ / "ckpt").string() +
                       " to resume from (the job was lost after 1 step(s), before its first save); not restarted"),
            std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "plait launch: starting:"), 1u) << r.err;
}

}  // namespace
