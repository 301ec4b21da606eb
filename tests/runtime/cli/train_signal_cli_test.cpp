// Preemption of `plait train` under mpirun (docs/checkpoints.md, "Preemption"): a stop signal
// (SIGUSR1 to mpirun, which forwards it to every rank; SIGTERM to one rank) becomes one decision
// of the whole job, carried in the reduction every step already does:
//
// - every rank stops after the same step, the checkpoint of the step after it is saved, rank 0
//   says so with the save's duration, and the job exits 75 (kPreemptedExitStatus);
// - `--resume` from it continues bit for bit as the uninterrupted run (losses, validation losses,
//   checkpoint files), which is run with the same schedule and stopped where the resumed run
//   stops (the schedule is far longer than any run gets through, so however fast the machine,
//   the signal always finds the run under way);
// - a kill during that save (a grace too short) leaves the previous checkpoint as `latest`,
//   from which `--resume` is exact too;
// - with checkpoint.on_signal false a signal ends the job as it always did.
// The signals are real: sent by the shell once the run has reached a step (never after a delay),
// or by a rank to itself in a given step (the hidden --inject-failure R:S:sigterm).
#include <regex>

#include "train_cli_fixture.h"

namespace {

using namespace plait_train_cli;

class TrainSignalCli : public TrainCheckpointCli {
 protected:
  // `mpirun -np 2 plait train ARGS` in the background (the environment of run_mpi_test.sh): once
  // `metrics` holds the line of training step `after`, the shell runs `send` ($job is mpirun's
  // pid) and waits for the job, at most 60 s, then SIGKILLs it (a scheduler's end of grace). The
  // job's exit status is in the last stderr line ("job exit status N").
  Result signalled_job(const std::string& args, const fs::path& metrics, int after, const std::string& send) {
    const std::string script =
        "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1\n"
        "mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS " +
        std::string(::geteuid() == 0 ? "--allow-run-as-root " : "") + PLAIT_BINARY + " train " + args + " &\n" +
        "job=$!\n"
        "n=0; until grep -q '\"step\":" + std::to_string(after) + "}' " + metrics.string() +
        " 2>/dev/null; do sleep 0.02; n=$((n+1)); [ $n -gt 3000 ] && break; done\n" + send +
        "\n( sleep 60; kill -KILL $job 2>/dev/null ) & guard=$!\n"
        "wait $job; status=$?\n"
        "kill $guard 2>/dev/null\n"
        "echo \"job exit status $status\" >&2\n";
    std::ofstream(dir_ / "job.sh") << script;
    return shell("bash " + (dir_ / "job.sh").string());
  }
  static int signalled_status(const Result& r) {
    const std::size_t at = r.err.rfind("job exit status ");
    return at == std::string::npos ? -1 : std::atoi(r.err.c_str() + at + 16);
  }

  // The step every rank stopped after, from rank 0's line, and that line's other claims: the
  // checkpoint of the next step saved, with its duration.
  static int stopped_after(const Result& r, const std::string& reached, const fs::path& ckpt) {
    const std::regex line("plait: a stop signal reached " + reached +
                          ": every rank stopped after step ([0-9]+); saved its checkpoint (\\S+) in "
                          "[0-9]+\\.[0-9]+ s \\(a resume starts at step ([0-9]+)\\)");
    std::smatch m;
    if (!std::regex_search(r.err, m, line)) {
      ADD_FAILURE() << "no stop line for " << reached << " in:\n" << r.err;
      return -1;
    }
    const int step = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[3]), step + 1);
    EXPECT_EQ(fs::path(m[2].str()), ckpt / plait::checkpoint::checkpoint_dir_name(step + 1));
    return step;
  }

  // The state a preempted run left: the checkpoint of step + 1 complete and named by `latest`,
  // metrics up to `step` and none after.
  static void expect_stopped_at(int step, const fs::path& ckpt, const fs::path& metrics) {
    const std::optional<std::string> latest = plait::checkpoint::latest_checkpoint(ckpt.string());
    ASSERT_TRUE(latest);
    EXPECT_EQ(fs::path(*latest).filename(), plait::checkpoint::checkpoint_dir_name(step + 1));
    EXPECT_EQ(plait::checkpoint::CheckpointReader(*latest).manifest().step, step + 1);
    const Metrics got = read_metrics(metrics);
    ASSERT_FALSE(got.train.empty());
    EXPECT_EQ(got.train.rbegin()->first, step);
  }

  // A run whose schedule is far longer than it ever gets through (kSteps), which an external
  // signal interrupts once it has reached step 2: it must stop with status 75 after a step S
  // that rank 0 names, having saved step S + 1. Then --resume --stop-at S + 3 must end exactly
  // as the uninterrupted run stopped at S + 3 (its reference, run afterwards): the same losses
  // and validation losses of every step, byte-identical checkpoint files.
  void interrupt_and_resume(const std::string& send, const std::string& reached) {
    constexpr int kSteps = 5000;  // only sets the schedule: no run here gets near it
    const fs::path cfg = config("sig.json", 2, "", "", kSteps, 0);
    const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
    const fs::path metrics = dir_ / "sig.jsonl";
    const Result r = signalled_job("--config " + cfg.string() + " --metrics " + metrics.string(), metrics, 2, send);
    EXPECT_EQ(signalled_status(r), 75) << r.err;
    const int step = stopped_after(r, reached, ckpt);
    ASSERT_GE(step, 2) << r.err;
    EXPECT_NE(r.out.find("preempted: exit status 75; continue with plait train --resume"), std::string::npos) << r.out;
    expect_stopped_at(step, ckpt, metrics);

    const std::string stop_at = " --stop-at " + std::to_string(step + 3);
    const Result resumed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume" + stop_at);
    ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from " + (ckpt / plait::checkpoint::checkpoint_dir_name(step + 1)).string()),
              std::string::npos)
        << resumed.out;
    const fs::path whole = config("whole.json", 2, "", "", kSteps, 0);
    const Result reference = train(2, "--config " + whole.string() + " --metrics " + (dir_ / "whole.jsonl").string() + stop_at);
    ASSERT_EQ(job_status(reference).first, 0) << reference.err;
    const Metrics want = read_metrics(dir_ / "whole.jsonl"), got = read_metrics(metrics);
    ASSERT_EQ(want.train.size(), static_cast<std::size_t>(step + 3));
    EXPECT_EQ(got.train.size(), want.train.size());
    const auto line_of = [](const std::map<int, std::string>& m, int s) { return m.contains(s) ? m.at(s) : ""; };
    for (const auto& [s, line] : want.train) EXPECT_EQ(line_of(got.train, s), line) << "step " << s;
    for (const auto& [s, line] : want.val) EXPECT_EQ(line_of(got.val, s), line) << "validation, step " << s;
    const std::string last = plait::checkpoint::checkpoint_dir_name(step + 3);
    for (const char* file : {"stage_0.safetensors", "stage_1.safetensors"}) {
      EXPECT_EQ(slurp(ckpt / last / file), slurp(dir_ / "whole.ckpt" / last / file)) << file;
    }
  }
};

// SIGUSR1 to mpirun, which forwards it to every rank without killing them (unlike SIGTERM): the
// ranks receive it at slightly different moments, the step's reduction makes it one decision.
TEST_F(TrainSignalCli, SigusrToMpirunStopsEveryRankAfterOneStepSavedAndResumeIsExact) {
  // (Rank 0 may count 1 of 2 when its own copy arrived after that step's reduction: the next one
  // would have carried it; the decision is the same on every rank either way.)
  interrupt_and_resume("kill -USR1 $job", "[12] of 2 rank\\(s\\)(?: \\(SIGUSR1 on rank 0\\))?");
}

// SIGTERM to one rank only (as a scheduler or a node agent may send it), with a grace of 60 s
// before SIGKILL: the other rank learns of it in the step's reduction. (Local Open MPI ranks are
// mpirun's children; rank 1 is the one whose environment says so.)
TEST_F(TrainSignalCli, SigtermToOneRankStopsEveryRankAfterOneStepSavedAndResumeIsExact) {
  interrupt_and_resume(
      "for c in $(pgrep -P $job); do tr '\\0' '\\n' < /proc/$c/environ | grep -qx OMPI_COMM_WORLD_RANK=1 && "
      "kill -TERM $c; done",
      "1 of 2 rank\\(s\\)");
}

// The signal in a known step (rank 1 sends itself SIGTERM in the middle of step 2): every rank
// stops after step 2, saves step_00000003, outside the checkpoint.every rhythm; the job exits 75.
TEST_F(TrainSignalCli, ASignalInAGivenStepSavesTheStepAfterItAndResumeIsExact) {
  const Metrics want = reference();
  const fs::path cfg = config("term.json");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  const fs::path metrics = dir_ / "term.jsonl";
  const Result r = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --inject-failure 1:2:sigterm");
  EXPECT_EQ(job_status(r).first, 75) << r.err;
  EXPECT_EQ(stopped_after(r, "1 of 2 rank\\(s\\)", ckpt), 2);
  EXPECT_NE(r.out.find("(stopped by a signal before step 6)"), std::string::npos) << r.out;
  expect_stopped_at(2, ckpt, metrics);
  EXPECT_TRUE(fs::exists(ckpt / "step_00000002"));  // checkpoint.every's, kept

  const Result resumed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume");
  ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from " + (ckpt / "step_00000003").string() + ": step 3"), std::string::npos)
      << resumed.out;
  expect_same_run(want, metrics, ckpt);
}

// A grace too short for the save: the kill comes while the signal's checkpoint is written (here
// rank 0 is SIGKILLed after writing its file, before the commit). The save is abandoned: `latest`
// still names the previous checkpoint, which --resume continues exactly.
TEST_F(TrainSignalCli, AKillDuringTheSignalsSaveKeepsThePreviousCheckpoint) {
  const Metrics want = reference();
  const fs::path cfg = config("short.json");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  const fs::path metrics = dir_ / "short.jsonl";
  const Result r = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() +
                                " --inject-failure 1:2:sigterm,0:3:kill-in-save");
  const int status = job_status(r).first;
  EXPECT_NE(status, 0);
  EXPECT_NE(status, 75);
  EXPECT_NE(r.err.find("rank 0: step 3: killing itself with SIGKILL after writing its checkpoint files"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(ckpt / "step_00000003.partial"));
  EXPECT_FALSE(fs::exists(ckpt / "step_00000003"));
  EXPECT_EQ(fs::path(*plait::checkpoint::latest_checkpoint(ckpt.string())).filename(), "step_00000002");

  const Result resumed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume");
  ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from " + (ckpt / "step_00000002").string() + ": step 2"), std::string::npos)
      << resumed.out;
  expect_same_run(want, metrics, ckpt, 2);
}

// checkpoint.on_signal false: no handler, so SIGTERM ends the rank (and mpirun the job) at once.
TEST_F(TrainSignalCli, WithoutOnSignalASignalEndsTheJobAsBefore) {
  const fs::path cfg = config("off.json", 2, "", R"(, "on_signal": false)");
  const Result r = train(2, "--config " + cfg.string() + " --inject-failure 1:2:sigterm");
  const int status = job_status(r).first;
  EXPECT_NE(status, 0);
  EXPECT_NE(status, 75);
  EXPECT_NE(r.err.find("process rank 1 with PID"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("a stop signal reached"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fs::path(cfg).replace_extension("ckpt") / "step_00000003"));
}

}  // namespace
