// `plait train` under mpirun with token shards, checkpoints and faults, end to end through the
// binary (tests/mpi/run_mpi_test.sh starts each job: one thread per rank, --oversubscribe):
//
// - a rank SIGKILLed while the job saves a checkpoint (after writing its file, before the
//   commit; the coordinator rank 0 or another) stops the job non-zero within 10 s, named by
//   mpirun; `latest` still names the previous checkpoint, which loads (sizes, CRC-32C, headers),
//   and `--resume` from it reproduces the uninterrupted run's losses and final files bit for bit;
// - a rank SIGKILLed during the validation pass stops the job the same way;
// - a NaN loss stops the job with one line naming the step and the rank (abort), or is skipped
//   with a warning and the run finishes (skip);
// - a checkpoint of 4 pipeline stages continues on 2 (--pp 2), the next step's loss matching;
// - --resume DIR without --config runs the checkpoint's own config; a corrupted file is refused
//   naming the file and its checksum;
// - the default thread count under mpirun is the hardware threads shared by the local ranks.
#include "train_cli_fixture.h"

namespace {

using namespace plait_train_cli;

TEST_F(TrainCheckpointCli, KillDuringSaveLeavesThePreviousCheckpointAndResumeIsExact) {
  const fs::path whole = config("whole.json");
  const Result reference = train(2, "--config " + whole.string() + " --metrics " + (dir_ / "whole.jsonl").string());
  ASSERT_EQ(job_status(reference).first, 0) << reference.err;
  const Metrics want = read_metrics(dir_ / "whole.jsonl");
  ASSERT_EQ(want.train.size(), 6u);

  for (int victim : {1, 0}) {  // another rank, then the coordinator
    SCOPED_TRACE("rank " + std::to_string(victim) + " killed");
    const fs::path cfg = config("killed" + std::to_string(victim) + ".json");
    const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
    const fs::path metrics = dir_ / ("killed" + std::to_string(victim) + ".jsonl");
    const Result killed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() +
                                       " --inject-failure " + std::to_string(victim) + ":4:kill-in-save");
    const auto [status, seconds] = job_status(killed);
    EXPECT_NE(status, 0);
    EXPECT_LE(seconds, 10.0);
    EXPECT_NE(killed.err.find("rank " + std::to_string(victim) +
                              ": step 4: killing itself with SIGKILL after writing its checkpoint files"),
              std::string::npos)
        << killed.err;
    EXPECT_NE(killed.err.find("process rank " + std::to_string(victim) + " with PID"), std::string::npos)
        << killed.err;
    // The save of step 4 never completed: `latest` names step 2, which loads.
    EXPECT_EQ(staging_dirs(ckpt, 4), 1u);
    EXPECT_FALSE(fs::exists(ckpt / "step_00000004"));
    const std::optional<std::string> latest = plait::checkpoint::latest_checkpoint(ckpt.string());
    ASSERT_TRUE(latest);
    EXPECT_EQ(fs::path(*latest).filename(), "step_00000002");
    const plait::checkpoint::CheckpointReader reader(*latest);
    EXPECT_EQ(reader.manifest().step, 2);

    const Result resumed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume");
    ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from " + (ckpt / "step_00000002").string() + ": step 2"), std::string::npos)
        << resumed.out;
    const Metrics got = read_metrics(metrics);
    for (const auto& [step, line] : want.train) EXPECT_EQ(got.train.at(step), line) << "step " << step;
    for (const auto& [step, line] : want.val) EXPECT_EQ(got.val.at(step), line) << "validation, step " << step;
    for (const char* file : {"stage_0.safetensors", "stage_1.safetensors"}) {
      EXPECT_EQ(slurp(ckpt / "step_00000006" / file),
                slurp(fs::path(whole).replace_extension("ckpt") / "step_00000006" / file))
          << file;
    }
    // The killed job's lock file stays, naming its rank 0; the kill freed the lock itself, so the
    // restart above took it; the restart removed the dead run's staging directory.
    EXPECT_NE(resumed.out.find("resume: removed step_00000004.partial-"), std::string::npos) << resumed.out;
    EXPECT_EQ(staging_dirs(ckpt, 4), 0u);
    EXPECT_TRUE(fs::exists(ckpt / ".plait.lock"));
  }
}

// Two jobs on one checkpoint.dir (a re-submitted job): the second is refused at once, on every
// rank, with one line naming the directory and the first job's rank 0; the first finishes and its
// checkpoints are complete and equal to those of a run that was alone.
TEST_F(TrainCheckpointCli, ASecondJobOnTheSameCheckpointDirectoryIsRefused) {
  const Metrics want = reference();
  const fs::path cfg = config("first.json");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  const fs::path metrics = dir_ / "first.jsonl";
  const fs::path status = dir_ / "first.status";
  // The first job in the background; once its rank 0 holds the lock and has said so, the test
  // stops that process (SIGSTOP: the lock stays held, the other rank waits for it) so that the
  // first job is surely inside its run while the second starts, and lets it go on afterwards.
  const std::string first = "(bash " PLAIT_MPI_RUNNER " --timeout 120 --ranks 2 -- " + std::string(PLAIT_BINARY) +
                            " train --config " + cfg.string() + " --metrics " + metrics.string() + " >" +
                            (dir_ / "first.out").string() + " 2>" + (dir_ / "first.err").string() + "; echo $? >" +
                            status.string() + ") &";
  ASSERT_EQ(std::system(first.c_str()), 0);
  for (int i = 0; i < 3000 && slurp(ckpt / ".plait.lock").find('\n') == std::string::npos && !fs::exists(status); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string holder = slurp(ckpt / ".plait.lock");
  const std::size_t pid_at = holder.find("pid=");
  ASSERT_NE(pid_at, std::string::npos) << "the first job never took the lock: " << slurp(dir_ / "first.err");
  const std::string pid = holder.substr(pid_at + 4, holder.find('\n') - pid_at - 4);
  ASSERT_EQ(::kill(std::atoi(pid.c_str()), SIGSTOP), 0);
  const Result second = train(2, "--config " + cfg.string() + " --resume");  // the same job, submitted again
  ::kill(std::atoi(pid.c_str()), SIGCONT);
  for (int i = 0; i < 2400 && !fs::exists(status); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(status));
  EXPECT_EQ(std::atoi(slurp(status).c_str()), 0) << slurp(dir_ / "first.err");

  const auto [code, seconds] = job_status(second);
  EXPECT_NE(code, 0);
  EXPECT_LE(seconds, 20.0);
  EXPECT_EQ(count_of(second.err, "plait: error:"), 1u) << second.err;
  EXPECT_NE(second.err.find("plait: error: rank 0: " + ckpt.string() + ": in use by another plait run (pid " + pid +
                            " on host "),
            std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("a checkpoint directory is written by one run at a time"), std::string::npos) << second.err;
  // The first job's checkpoints: every one complete, the last equal to the lone run's.
  const Metrics got = read_metrics(metrics);
  for (const auto& [step, line] : want.train) EXPECT_EQ(got.train.at(step), line) << "step " << step;
  for (const char* step : {"step_00000002", "step_00000004", "step_00000006"}) {
    EXPECT_EQ(plait::checkpoint::CheckpointReader((ckpt / step).string()).manifest().files.size(), 2u) << step;
  }
  EXPECT_EQ(fs::path(*plait::checkpoint::latest_checkpoint(ckpt.string())).filename(), "step_00000006");
  for (const char* file : {"stage_0.safetensors", "stage_1.safetensors"}) {
    EXPECT_EQ(slurp(ckpt / "step_00000006" / file), slurp(dir_ / "whole.ckpt" / "step_00000006" / file)) << file;
  }
  EXPECT_EQ(staging_dirs(ckpt, 2) + staging_dirs(ckpt, 4) + staging_dirs(ckpt, 6), 0u);
}

TEST_F(TrainCheckpointCli, KillDuringValidationStopsTheJobNamingTheRank) {
  const Result r = train(2, "--config " + config("eval.json").string() + " --inject-failure 1:2:kill-in-eval");
  const auto [status, seconds] = job_status(r);
  EXPECT_NE(status, 0);
  EXPECT_LE(seconds, 10.0);
  EXPECT_NE(r.err.find("rank 1: step 2: killing itself with SIGKILL during evaluation"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("process rank 1 with PID"), std::string::npos) << r.err;
}

TEST_F(TrainCheckpointCli, NanLossAbortsWithOneLineOrIsSkipped) {
  const Result abort = train(2, "--config " + config("abort.json").string() + " --inject-failure 1:3:nan-loss");
  EXPECT_NE(job_status(abort).first, 0);
  EXPECT_NE(abort.err.find("plait: error: rank 0: step 3: non-finite loss (NaN or infinite) on rank 1; "
                           "stopping (train.on_nonfinite is \"abort\""),
            std::string::npos)
      << abort.err;
  std::size_t errors = 0;
  for (std::size_t at = abort.err.find("plait: error:"); at != std::string::npos;
       at = abort.err.find("plait: error:", at + 1)) {
    ++errors;
  }
  EXPECT_EQ(errors, 1u) << abort.err;  // rank 0 alone reports what every rank found

  const Result skip = train(2, "--config " + config("skip.json", 2, R"(, "on_nonfinite": "skip")").string() +
                                   " --inject-failure 0:3:nan-grad --metrics " + (dir_ / "skip.jsonl").string());
  ASSERT_EQ(job_status(skip).first, 0) << skip.err;
  EXPECT_NE(skip.err.find("plait: warning: step 3: NaN gradient in wte on stage 0"), std::string::npos) << skip.err;
  EXPECT_NE(skip.err.find("skipped its update"), std::string::npos);
  EXPECT_NE(skip.out.find("(1 non-finite step(s) skipped)"), std::string::npos) << skip.out;
  const Metrics m = read_metrics(dir_ / "skip.jsonl");
  EXPECT_NE(m.train.at(3).find("\"skipped\":true"), std::string::npos);
  EXPECT_NE(m.train.at(4).find("\"skipped\":false"), std::string::npos);
}

TEST_F(TrainCheckpointCli, FourStagesContinueOnTwoAndWithTheCheckpointsOwnConfig) {
  const fs::path four = config("four.json", 4);
  const Result whole = train(4, "--config " + four.string() + " --metrics " + (dir_ / "four.jsonl").string());
  ASSERT_EQ(job_status(whole).first, 0) << whole.err;
  const Metrics want = read_metrics(dir_ / "four.jsonl");

  // --resume DIR of an older checkpoint without --config: the checkpoint's config (pp 4, here
  // with --pp 2 on 2 ranks), writing into the directory that holds it; the newer checkpoints
  // there are kept aside, renamed, not deleted, and the choice is printed.
  const fs::path ckpt4 = fs::path(four).replace_extension("ckpt");
  const fs::path step2 = ckpt4 / "step_00000002";
  const std::string six_before = slurp(ckpt4 / "step_00000006" / "stage_3.safetensors");
  const Result two = train(2, "--resume " + step2.string() + " --pp 2 --metrics " + (dir_ / "own.jsonl").string() +
                                  " --stop-at 4");
  ASSERT_EQ(job_status(two).first, 0) << two.err;
  EXPECT_NE(two.out.find("plait train: config " + (step2 / "manifest.json").string() + " (config), the checkpoint's own"),
            std::string::npos)
      << two.out;
  EXPECT_NE(two.out.find("checkpoints: into " + ckpt4.string() + " (where the checkpoint resumed from lives)"),
            std::string::npos)
      << two.out;
  for (const char* step : {"step_00000004", "step_00000006"}) {
    EXPECT_NE(two.out.find("resume: kept " + (ckpt4 / step).string() + " aside as " + step + ".aside"), std::string::npos)
        << two.out;
    EXPECT_TRUE(fs::is_directory(ckpt4 / (std::string(step) + ".aside"))) << step;
  }
  EXPECT_EQ(slurp(ckpt4 / "step_00000006.aside" / "stage_3.safetensors"), six_before);
  EXPECT_TRUE(fs::is_directory(ckpt4 / "step_00000004"));  // saved again by this run (--stop-at 4)
  EXPECT_EQ(fs::path(*plait::checkpoint::latest_checkpoint(ckpt4.string())).filename(), "step_00000004");
  const fs::path cfg2 = config("two.json", 2);
  const Result resumed = train(2, "--config " + cfg2.string() + " --resume " + step2.string() + " --metrics " +
                                      (dir_ / "two.jsonl").string());
  ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
  const Metrics got = read_metrics(dir_ / "two.jsonl");
  // Step 2: the same parameters on another cut (only the loss sum's order may differ); step 3:
  // after an update whose fp32 gradient sums were associated differently.
  EXPECT_NEAR(loss_of(got.train.at(2)), loss_of(want.train.at(2)), 1e-12 * loss_of(want.train.at(2)));
  EXPECT_NEAR(loss_of(got.train.at(3)), loss_of(want.train.at(3)), 1e-6 * loss_of(want.train.at(3)));

  // Without --config: the checkpoint's own config (its pp 4 layout and directory).
  const Result own = train(4, "--resume " + (dir_ / "two.ckpt").string() + " --stop-at 7 --steps 8");
  EXPECT_NE(job_status(own).first, 0);  // two.ckpt's config is pp 2: 4 ranks are refused
  EXPECT_NE(own.err.find("parallel.pp: the layout needs 2 ranks (pp 2 x dp 1) but the job has 4"), std::string::npos)
      << own.err;
  // A longer schedule (--steps 8 of a 6-step run) is a recipe change: allowed explicitly, printed.
  const Result own2 = train(2, "--resume " + (dir_ / "two.ckpt").string() + " --steps 8 --allow-recipe-change");
  ASSERT_EQ(job_status(own2).first, 0) << own2.err;
  EXPECT_NE(own2.out.find("resume: recipe change (--allow-recipe-change): train.steps 6 -> 8, the learning-rate "
                          "schedule"),
            std::string::npos)
      << own2.out;
  EXPECT_NE(own2.out.find("resumed from " + (dir_ / "two.ckpt" / "step_00000006").string() + ": step 6"),
            std::string::npos)
      << own2.out;
  EXPECT_TRUE(fs::exists(dir_ / "two.ckpt" / "step_00000008"));
}

TEST_F(TrainCheckpointCli, ACorruptedCheckpointIsRefusedNamingTheFile) {
  const fs::path cfg = config("corrupt.json");
  ASSERT_EQ(job_status(train(2, "--config " + cfg.string() + " --stop-at 2")).first, 0);
  const fs::path file = fs::path(cfg).replace_extension("ckpt") / "step_00000002" / "stage_1.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const Result r = train(2, "--config " + cfg.string() + " --resume");
  EXPECT_NE(job_status(r).first, 0);
  EXPECT_NE(r.err.find(file.string() + ": (checksum): the manifest's CRC-32C is 0x"), std::string::npos) << r.err;
}

TEST_F(TrainCheckpointCli, ThreadsPerRankDefaultToTheHardwareSharedByTheLocalRanks) {
  const fs::path cfg = config("threads.json");
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const std::string expected = "threads: " + std::to_string(std::max(1u, hardware / 2)) + " per rank (" +
                               std::to_string(hardware) + " hardware threads / 2 ranks on this node)";
  const Result r = shell(std::string("env -u OMP_NUM_THREADS mpirun -np 2 --oversubscribe --bind-to none ") +
                         (::geteuid() == 0 ? "--allow-run-as-root " : "") + PLAIT_BINARY + " train --config " +
                         cfg.string() + " --stop-at 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
}

// A save stopped between renaming step_N.partial/ to step_N/ and rewriting `latest` leaves a
// complete step_N/ that `latest` does not name: by a kill of the coordinator (rank 0) in that
// window, or a full disk failing the write of latest's temporary file (here `latest` is set back
// by hand to what such a save leaves). Every later --resume used to refuse ("already holds
// checkpoints up to step_00000004 ... continue the newest with --resume"); it takes the newest
// complete checkpoint that verifies, repairs `latest`, and continues exactly.
TEST_F(TrainCheckpointCli, AnInterruptedCommitResumesFromTheNewestCompleteCheckpoint) {
  const Metrics want = reference();
  for (const bool killed : {true, false}) {
    SCOPED_TRACE(killed ? "rank 0 killed in the commit" : "latest not rewritten (disk full)");
    const std::string name = killed ? "killed.json" : "full.json";
    const fs::path cfg = config(name);
    const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
    const fs::path metrics = dir_ / (name + ".jsonl");
    if (killed) {
      const Result r = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() +
                                    " --inject-failure 0:4:kill-in-commit");
      EXPECT_NE(job_status(r).first, 0);
      EXPECT_NE(r.err.find("rank 0: step 4: killing itself with SIGKILL after renaming the checkpoint's directory, "
                           "before rewriting latest"),
                std::string::npos)
          << r.err;
    } else {
      ASSERT_EQ(job_status(train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --stop-at 4")).first, 0);
      std::ofstream(ckpt / "latest", std::ios::trunc) << "step_00000002\n";
    }
    ASSERT_TRUE(fs::exists(ckpt / "step_00000004" / "manifest.json"));
    EXPECT_EQ(fs::path(*plait::checkpoint::latest_checkpoint(ckpt.string())).filename(), "step_00000002");

    const Result resumed = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume");
    ASSERT_EQ(job_status(resumed).first, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resume: latest names step_00000002, but step_00000004 is newer and complete"),
              std::string::npos)
        << resumed.out;
    EXPECT_NE(resumed.out.find("resumed from " + (ckpt / "step_00000004").string() + ": step 4"), std::string::npos)
        << resumed.out;
    expect_same_run(want, metrics, ckpt, 4);
    EXPECT_EQ(fs::path(*plait::checkpoint::latest_checkpoint(ckpt.string())).filename(), "step_00000006");
  }
}

// The docs promise a restart loop can always pass --resume: also before the checkpoint
// directory exists.
TEST_F(TrainCheckpointCli, ResumeIntoADirectoryThatDoesNotExistYetStartsFresh) {
  const fs::path cfg = config("fresh.json");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  ASSERT_FALSE(fs::exists(ckpt));
  const Result r = train(2, "--config " + cfg.string() + " --resume --stop-at 2");
  ASSERT_EQ(job_status(r).first, 0) << r.err;
  EXPECT_NE(r.out.find("resume: no complete checkpoint in " + ckpt.string() + " yet; starting at step 0"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(ckpt / "step_00000002" / "manifest.json"));
}

// The newest checkpoint corrupt (a flipped bit in a file, the CRC-32C no longer matching):
// --resume says which it skipped and why, keeps it aside (renamed, its bytes untouched), continues
// from the newest one that verifies, and the run ends as the uninterrupted one.
TEST_F(TrainCheckpointCli, ACorruptNewestCheckpointFallsBackToTheNewestThatVerifies) {
  const Metrics want = reference();
  const fs::path cfg = config("rot.json");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  const fs::path metrics = dir_ / "rot.jsonl";
  ASSERT_EQ(job_status(train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --stop-at 4")).first, 0);
  const fs::path victim = ckpt / "step_00000004" / "stage_1.safetensors";
  std::string bytes = slurp(victim);
  bytes[bytes.size() - 9] ^= 0x10;
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;

  const Result r = train(2, "--config " + cfg.string() + " --metrics " + metrics.string() + " --resume");
  ASSERT_EQ(job_status(r).first, 0) << r.err;
  EXPECT_NE(r.out.find("resume: skipped " + (ckpt / "step_00000004").string() + ", which does not verify: " +
                       victim.string() + ": (checksum): the manifest's CRC-32C is 0x"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resumed from " + (ckpt / "step_00000002").string() + ": step 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resume: kept " + (ckpt / "step_00000004").string() + " aside as step_00000004.aside"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(ckpt / "step_00000004.aside" / "stage_1.safetensors"), bytes);
  expect_same_run(want, metrics, ckpt);
}

// A checkpoint whose checksums pass but whose state is bad: a negative AdamW second moment (the
// next update's square root makes a NaN parameter, which the next save wrote) or a NaN
// parameter. Loading refuses it, naming the tensor and element; an older good one is used when
// there is one.
TEST_F(TrainCheckpointCli, NonFiniteOrImpossibleStateIsRefusedOnLoad) {
  const fs::path cfg = config("bad_state.json");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  ASSERT_EQ(job_status(train(2, "--config " + cfg.string() + " --stop-at 2")).first, 0);
  rewrite_tensor_value(ckpt / "step_00000002", "stage_0.safetensors", "h.1.attn.c_attn.weight.adam_v", 3, -1.0f);
  ASSERT_NO_THROW(plait::checkpoint::CheckpointReader((ckpt / "step_00000002").string()));  // CRCs are fine
  const Result r = train(2, "--config " + cfg.string() + " --resume");
  EXPECT_NE(job_status(r).first, 0);
  EXPECT_EQ(count_of(r.err, "plait: error:"), 1u) << r.err;
  EXPECT_NE(r.err.find("none of its 1 complete checkpoint(s) verifies (step_00000002: " + (ckpt / "step_00000002").string() +
                       ": tensor \"h.1.attn.c_attn.weight.adam_v\": element 3 is -1.000000; AdamW's second moment is a "
                       "mean of squares, never negative"),
            std::string::npos)
      << r.err;

  // A NaN parameter in the newest of two: skipped, the older one resumed.
  const fs::path cfg2 = config("nan_state.json");
  const fs::path ckpt2 = fs::path(cfg2).replace_extension("ckpt");
  ASSERT_EQ(job_status(train(2, "--config " + cfg2.string() + " --stop-at 4")).first, 0);
  rewrite_tensor_value(ckpt2 / "step_00000004", "stage_1.safetensors", "h.3.mlp.c_proj.weight", 0,
                       std::numeric_limits<float>::quiet_NaN());
  const Result r2 = train(2, "--config " + cfg2.string() + " --resume --stop-at 5");
  ASSERT_EQ(job_status(r2).first, 0) << r2.err;
  EXPECT_NE(r2.out.find("which does not verify: " + (ckpt2 / "step_00000004" / "stage_1.safetensors").string() +
                        ": tensor \"h.3.mlp.c_proj.weight\": element 0 is NaN"),
            std::string::npos)
      << r2.out;
  EXPECT_NE(r2.out.find("resumed from " + (ckpt2 / "step_00000002").string() + ": step 2"), std::string::npos) << r2.out;
}

// checkpoint.save_initial: the untrained parameters as step 0, so a run can be reproduced and
// compared from its very start: resuming from step 0 is the run from scratch, bit for bit.
TEST_F(TrainCheckpointCli, SaveInitialKeepsTheUntrainedParametersAsStepZero) {
  const Metrics want = reference();
  const fs::path cfg = config("initial.json", 2, "", R"(, "save_initial": true)");
  const fs::path ckpt = fs::path(cfg).replace_extension("ckpt");
  const Result r = train(2, "--config " + cfg.string() + " --stop-at 1");
  ASSERT_EQ(job_status(r).first, 0) << r.err;
  EXPECT_NE(r.out.find("checkpoint: " + (ckpt / "step_00000000").string() + " (step 0, the untrained parameters"),
            std::string::npos)
      << r.out;
  const plait::checkpoint::CheckpointReader zero((ckpt / "step_00000000").string());
  EXPECT_EQ(zero.manifest().step, 0);
  EXPECT_EQ(zero.manifest().optimizer.at("steps"), 0);
  std::vector<float> m(static_cast<std::size_t>(zero.shape("wte")[0] * zero.shape("wte")[1]));
  zero.read("wte.adam_m", m);
  EXPECT_EQ(*std::max_element(m.begin(), m.end()), 0.0f);

  const fs::path again = config("again.json");
  const Result from_zero = train(2, "--config " + again.string() + " --resume " + (ckpt / "step_00000000").string() +
                                        " --metrics " + (dir_ / "again.jsonl").string());
  ASSERT_EQ(job_status(from_zero).first, 0) << from_zero.err;
  EXPECT_NE(from_zero.out.find(": step 0"), std::string::npos) << from_zero.out;
  expect_same_run(want, dir_ / "again.jsonl", fs::path(again).replace_extension("ckpt"));
}

// --resume DIR without --config: the run uses, and says it uses, the checkpoint's config; the
// relative paths in it are those of the run that wrote it (resolved against the directory that
// run started in, which the manifest records); new checkpoints go beside the one resumed.
TEST_F(TrainCheckpointCli, WithoutConfigTheCheckpointsOwnConfigRunsAsItsRunSawIt) {
  std::ofstream(dir_ / "rel.json") << R"({"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
 "train": {"steps": 4, "seq": 32, "microbatch_size": 2, "microbatches": 2},
 "data": {"shards": "shards", "tokenizer": "byte"},
 "checkpoint": {"dir": "rel.ckpt", "every": 2},
 "parallel": {"schedule": "1f1b", "pp": 2}})";
  const std::string runner = "bash " PLAIT_MPI_RUNNER " --timeout 60 --ranks 2 -- " PLAIT_BINARY " train ";
  const Result first = shell("cd " + dir_.string() + " && " + runner + "--config rel.json --stop-at 2");
  ASSERT_EQ(job_status(first).first, 0) << first.err;
  const fs::path step2 = dir_ / "rel.ckpt" / "step_00000002";
  const nlohmann::json manifest = nlohmann::json::parse(slurp(step2 / "manifest.json"));
  EXPECT_EQ(manifest.at("working_directory"), fs::canonical(dir_).string());

  // From elsewhere (the filesystem root), naming the checkpoint root.
  const Result r = shell("cd / && " + runner + "--resume " + (dir_ / "rel.ckpt").string());
  ASSERT_EQ(job_status(r).first, 0) << r.err;
  EXPECT_NE(r.out.find("plait train: config " + (step2 / "manifest.json").string() + " (config), the checkpoint's own"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" shard(s) from " + (fs::canonical(dir_) / "shards").string() + "/corpus_train_000000.bin"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoints: into " + (dir_ / "rel.ckpt").string() + " (where the checkpoint resumed from lives)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "rel.ckpt" / "step_00000004" / "manifest.json"));

  // A checkpoint that does not record where its run started (an older plait's) is refused
  // clearly rather than reading whatever "shards" means here.
  nlohmann::json old = nlohmann::json::parse(slurp(step2 / "manifest.json"));
  old.erase("working_directory");
  std::ofstream(step2 / "manifest.json", std::ios::trunc) << old.dump(2);
  const Result refused = shell("cd / && " + runner + "--resume " + step2.string());
  EXPECT_NE(job_status(refused).first, 0);
  EXPECT_NE(refused.err.find("plait: error: " + (step2 / "manifest.json").string() +
                             ": config.data.shards: \"shards\" is a relative path, and this checkpoint does not "
                             "record the directory its run started in"),
            std::string::npos)
      << refused.err;
}

// Relative paths in a config resolve against the directory plait starts in, not the config
// file's; `--resume DIR --config FILE` reads DIR and writes new checkpoints into FILE's
// checkpoint.dir, leaving DIR as it was (docs/config.md, "Relative paths").
TEST_F(TrainCheckpointCli, RelativePathsResolveAgainstTheWorkingDirectoryAndSavesFollowTheConfig) {
  const auto write = [&](const std::string& name, const std::string& ckpt) {
    std::ofstream(dir_ / name) << R"({"model": {"layers": 1, "hidden": 16, "heads": 2, "vocab": 256, "max_seq": 16},
 "train": {"steps": 3, "seq": 16, "microbatch_size": 2},
 "data": {"shards": "shards", "tokenizer": "byte"},
 "checkpoint": {"dir": ")" + ckpt + R"("}})";
  };
  fs::create_directories(dir_ / "configs");
  write("configs/first.json", "first.ckpt");
  write("second.json", "second.ckpt");
  const std::string in_dir = "cd " + dir_.string() + " && OMP_NUM_THREADS=1 " PLAIT_BINARY " train ";
  const Result first = shell(in_dir + "--config configs/first.json --stop-at 2");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find(" shard(s) from shards/corpus_train_000000.bin"), std::string::npos) << first.out;
  EXPECT_TRUE(fs::exists(dir_ / "first.ckpt" / "step_00000002" / "manifest.json"));  // not configs/first.ckpt
  EXPECT_FALSE(fs::exists(dir_ / "configs" / "first.ckpt"));

  const Result second = shell(in_dir + "--config second.json --resume first.ckpt");
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_NE(second.out.find("resumed from first.ckpt/step_00000002: step 2"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("checkpoints: into second.ckpt (the config's checkpoint.dir; the checkpoint resumed "
                            "from is in first.ckpt)"),
            std::string::npos)
      << second.out;
  EXPECT_TRUE(fs::exists(dir_ / "second.ckpt" / "step_00000003" / "manifest.json"));
  EXPECT_FALSE(fs::exists(dir_ / "first.ckpt" / "step_00000003"));
}

// The header of a data-parallel job says what the memory table only shows the effect of: the
// shard level and offload, and the global micro-batch count with the per-replica one it comes from.
TEST_F(TrainCheckpointCli, TheHeaderNamesTheGlobalBatchTheShardLevelAndOffload) {
  std::ofstream(dir_ / "dp.json") << R"({"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 256, "max_seq": 32},
 "train": {"steps": 1, "seq": 32, "microbatch_size": 2, "microbatches": 2},
 "data": {"shards": ")" + (dir_ / "shards").string() + R"(", "tokenizer": "byte"},
 "parallel": {"schedule": "1f1b", "pp": 1, "dp": 2, "shard": 2, "offload": true,
              "devices": [{"host_memory_bytes": 67108864}, {"host_memory_bytes": 67108864}]}})";
  const Result r = train(2, "--config " + (dir_ / "dp.json").string());
  ASSERT_EQ(job_status(r).first, 0) << r.err;
  EXPECT_NE(r.out.find("train: 1 steps of 4 micro-batch(es) x 2 sequences of 32 tokens (256 tokens/step; "
                       "train.microbatches 2 per replica x dp 2)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  sharding: ZeRO level 2 on every virtual stage (parallel.shard), AdamW moments and master "
                       "weights offloaded to the host tier on every virtual stage (parallel.offload)\n"),
            std::string::npos)
      << r.out;
}

// A rank that stops making progress ends the job: here rank 1 SIGSTOPs itself in step 3 (a real
// SIGSTOP: it stays, stopped, sending nothing), so rank 0 waits on it forever. The report names
// the rank that stopped responding and what rank 0 waits for.
TEST_F(TrainCheckpointCli, AStoppedRankEndsTheJobNamingItAndWhatTheOthersWaitOn) {
  const Result r = stalled_job("stop");
  EXPECT_NE(r.err.find("plait: rank 1: step 3: stopping itself with SIGSTOP"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1: NOT RESPONDING for "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 0: step 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", waiting for "), std::string::npos) << r.err;
}

// A rank alive but stuck outside any wait (its main thread never returns, as in a deadlock):
// every rank still reports, none progresses; the report says what each is doing.
TEST_F(TrainCheckpointCli, ARankStuckAliveEndsTheJobSayingWhatEachRankDoes) {
  const Result r = stalled_job("hang");
  EXPECT_EQ(r.err.find("NOT RESPONDING"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1: step 3: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" on stage 1"), std::string::npos) << r.err;
}

// Errors every rank finds alike (a flag, a config, a checkpoint directory) are printed once.
TEST_F(TrainCheckpointCli, ErrorsEveryRankFindsArePrintedOnce) {
  const fs::path cfg = config("once.json");
  const Result flag = train(2, "--config " + cfg.string() + " --steps 0");
  EXPECT_NE(job_status(flag).first, 0);
  EXPECT_EQ(count_of(flag.err, "plait: error:"), 1u) << flag.err;
  EXPECT_NE(flag.err.find("plait: error: --steps: expected an integer in [1, 1073741824], found '0'"), std::string::npos)
      << flag.err;
  std::ofstream(dir_ / "dup.json") << slurp(cfg).replace(slurp(cfg).find("\"lr\""), 4, "\"lr\": 0.1, \"lr\"");
  const Result dup = train(2, "--config " + (dir_ / "dup.json").string());
  EXPECT_NE(job_status(dup).first, 0);
  EXPECT_EQ(count_of(dup.err, "plait: error:"), 1u) << dup.err;
  EXPECT_NE(dup.err.find("train.lr: the key \"lr\" appears twice"), std::string::npos) << dup.err;
  const Result stop = train(2, "--config " + cfg.string() + " --stop-at 9");
  EXPECT_NE(job_status(stop).first, 0);
  EXPECT_EQ(count_of(stop.err, "plait: error:"), 1u) << stop.err;
  EXPECT_NE(stop.err.find("plait: error: rank 0: --stop-at 9: expected a step in [1, 6]"), std::string::npos) << stop.err;
}

}  // namespace
