// `plait launch`: run a planned training job under mpirun and, when a rank dies, re-plan it for
// the devices that remain and resume it from its newest verified checkpoint, up to a restart
// budget (docs/runtime.md, "Lost ranks: plait launch"; issue 26). MPI ends the whole job when a
// rank dies, so a restart is a new job: wait for mpirun (the old processes) and the checkpoint
// directory's lock, find the lost rank's device in the plan, plan the cluster without it
// (plan/replan.h, in this process), write the new plan beside the old one and start
// `mpirun -np <ranks> plait train --config <new plan> --resume <checkpoint>`.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/cli/commands.h"
#include "plait/cli/flag_values.h"
#include "plait/core/atomic_file.h"
#include "plait/core/child_process.h"
#include "plait/core/directory_lock.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/stop_signals.h"
#include "plait/plan/remaining_cluster.h"
#include "plait/plan/replan.h"
#include "plait/runtime/lost_rank.h"
#include "plait/runtime/parallel_config.h"
#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/train_config.h"
#include "plait/runtime/training_resume.h"

namespace plait::cli {
namespace {

namespace fs = std::filesystem;

struct LaunchOptions {
  std::string cluster, config;
  std::string restarts_text = "1", lock_timeout_text = "60";
  std::string mpirun = "mpirun", mpirun_args;
  bool resume = false;
  // Hidden, for tests: the k-th value is the k-th job's --inject-failure (the first job's alone,
  // usually; a second one makes a restarted job lose a rank too).
  std::vector<std::string> inject_failure;
  std::vector<std::string> train_args;
};

void say(const std::string& line) {
  std::fprintf(stderr, "plait launch: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", s);
  return text;
}

std::string milliseconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g ms", s * 1e3);
  return text;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The value of `--flag VALUE` or `--flag=VALUE` among plait train's arguments, or "".
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].starts_with(flag + "=")) return args[i].substr(flag.size() + 1);
  }
  return "";
}

// What one job (one mpirun) did, as its output showed it.
struct JobOutcome {
  int status = 0;
  std::optional<runtime::LostRankNotice> launcher_notice, announcement;
  double notice_time = -1;      // monotonic seconds of the first failure notice read
  double first_step_time = -1;  // ... of its first progress line ("  step N (")
  std::int64_t first_step = -1;
  bool forwarded_stop = false;  // a stop signal reached plait launch and went on to the job
  double ended_time = 0;        // monotonic seconds when mpirun had exited and its pipes closed
};

// Runs argv, passing its lines on, noting the lost-rank notices and the first step (told to
// `on_first_step` as it is read).
JobOutcome run_job(const std::vector<std::string>& argv, const std::function<void(std::int64_t step)>& on_first_step) {
  JobOutcome out;
  ChildProcess job(argv);
  const auto on_line = [&](ChildProcess::Stream stream, const std::string& line) {
    std::FILE* to = stream == ChildProcess::Stream::kStdout ? stdout : stderr;
    std::fprintf(to, "%s\n", line.c_str());
    std::fflush(to);
    if (stream != ChildProcess::Stream::kStderr) return;
    if (out.first_step < 0 && line.starts_with("  step ") && line.find(" done)") != std::string::npos) {
      out.first_step = std::atoll(line.c_str() + 7);
      out.first_step_time = monotonic_seconds();
      on_first_step(out.first_step);
    }
    if (const std::optional<runtime::LostRankNotice> n = runtime::parse_lost_rank_notice(line)) {
      auto& slot = n->source == runtime::LostRankNotice::Source::kLauncher ? out.launcher_notice : out.announcement;
      if (!slot) slot = n;
      if (out.notice_time < 0) out.notice_time = monotonic_seconds();
    }
  };
  // A stop signal (a scheduler's preemption) goes on to mpirun as SIGUSR1, which Open MPI
  // forwards to every rank without killing any: they save and exit 75 (docs/checkpoints.md,
  // "Preemption"); SIGTERM to mpirun would kill them after odls_base_sigkill_timeout.
  const auto on_tick = [&] {
    if (stop_signal() == 0 || out.forwarded_stop) return;
    out.forwarded_stop = true;
    say(std::string(stop_signal_name(stop_signal())) + " received: forwarded to the job as SIGUSR1 (save and stop); "
        "no restart follows");
    ::kill(job.pid(), SIGUSR1);
  };
  out.status = job.run(on_line, on_tick);
  out.ended_time = monotonic_seconds();
  return out;
}

// The last training step a --metrics file records after byte `from`, or -1.
std::int64_t last_step_recorded(const std::string& path, std::uintmax_t from) {
  std::ifstream in(path);
  in.seekg(static_cast<std::streamoff>(from));
  std::int64_t last = -1;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step") && j.contains("loss")) last = std::max(last, j["step"].get<std::int64_t>());
  }
  return last;
}

std::uintmax_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

// A file that never existed beside `like`: <stem><suffix>.json, or <stem><suffix>-2.json, ...
std::string new_file_beside(const fs::path& like, const std::string& stem, const std::string& suffix) {
  for (int n = 1;; ++n) {
    const fs::path p = like.parent_path() / (stem + suffix + (n > 1 ? "-" + std::to_string(n) : "") + ".json");
    if (!fs::exists(fs::symlink_status(p))) return p.string();
  }
}

// The job as the current config describes it, and how its ranks map onto the cluster.
struct CurrentJob {
  std::string config_path;
  nlohmann::json config;
  runtime::JobConfig job;
  // The layout at its own world size, mpirun's -np: with tensor parallelism a schedule rank is a
  // TP group of t MPI ranks, so the job's ranks are the sum of its ranks' degrees
  // (runtime/pipeline_plan.h).
  runtime::PipelinePlan plan;
};

CurrentJob read_current(const std::string& path) {
  CurrentJob c;
  c.config_path = path;
  c.config = read_json_file(path);
  c.job = runtime::load_job_config(path);
  c.plan = runtime::build_pipeline_plan(c.job, std::nullopt);
  return c;
}

// The cluster device of MPI rank `rank`. Its schedule rank's first device is the plan's
// parallel.cluster_devices entry (plans written by plait plan name them, one per schedule rank),
// and its TP rank i the group's i-th device (plan::tp_members: consecutive devices of one type in
// one machine, as the planner lays TP groups out); without cluster_devices, the cluster's device
// `rank` (mpirun's by-slot order, as plait plan --evaluate reads a plan without them).
int device_of_rank(const CurrentJob& current, const plan::ClusterSpec& cluster, int rank) {
  const std::vector<std::string>& names = current.job.parallel.cluster_devices;
  if (rank < 0 || rank >= current.plan.world_size()) return -1;
  if (names.empty()) return rank < cluster.num_devices() ? rank : -1;
  const int r = current.plan.schedule_rank_of(rank);
  if (r >= static_cast<int>(names.size())) return -1;
  const int lead = plan::find_device(cluster, names[static_cast<std::size_t>(r)]);
  const int t = current.plan.tensor_parallel(r);
  if (lead < 0 || t == 1) return lead;
  const std::vector<int> members = plan::tp_members(cluster, lead, t);
  return members.empty() ? -1 : members[static_cast<std::size_t>(current.plan.tp_rank_of(rank))];
}

std::vector<std::string> job_argv(const LaunchOptions& o, const CurrentJob& current, const std::string& metrics,
                                  const std::string& resume_dir, std::size_t job) {
  const bool first = job == 0;
  std::vector<std::string> argv = {o.mpirun, "-np", std::to_string(current.plan.world_size())};
  for (const std::string& w : split_words(o.mpirun_args)) argv.push_back(w);
  argv.push_back(fs::read_symlink("/proc/self/exe").string());
  for (const char* w : {"train", "--config"}) argv.push_back(w);
  argv.push_back(current.config_path);
  if (!resume_dir.empty()) {
    argv.push_back("--resume");
    argv.push_back(resume_dir);
  } else if (first && o.resume) {
    argv.push_back("--resume");
  }
  if (flag_value(o.train_args, "--metrics").empty()) {
    argv.push_back("--metrics");
    argv.push_back(metrics);
  }
  if (job < o.inject_failure.size()) {
    argv.push_back("--inject-failure");
    argv.push_back(o.inject_failure[job]);
  }
  for (const std::string& a : o.train_args) argv.push_back(a);
  return argv;
}

// One restart's record, printed as it happens and summed up at the end.
struct Restart {
  int rank = -1;
  std::string device;
  std::int64_t resumed_step = 0, tokens_lost = 0;
  // Monotonic seconds: the failure notice, the old job's end, the new job's start, its first step.
  double notice = 0, ended = 0, started = 0, first_step = -1;
};

// The newest verified checkpoint of `root`, once no live run holds its lock; "" when there is none.
std::string newest_checkpoint(const std::string& root, double lock_timeout) {
  if (!fs::is_directory(root)) return "";
  const Directory dir = Directory::open(root);
  const std::unique_ptr<DirectoryLock> lock =
      wait_for_directory_lock(dir, "a checkpoint directory", lock_timeout, [&](const std::string& why) {
        say("waiting up to " + seconds_text(lock_timeout) + " for the old job's lock: " + why);
      });
  const runtime::ResumePoint point = runtime::find_resume_point(root);
  for (const auto& s : point.skipped) say("skipped " + s.dir + ", which does not verify: " + s.why);
  return point.reader ? point.reader->dir() : "";
}

struct LaunchState {
  plan::ClusterSpec cluster;
  CurrentJob current;
  std::string base_stem;  // the user's config's file stem
  std::vector<std::string> lost_devices;
  std::vector<Restart> restarts;
};

// After a job lost a rank: finds its device, the checkpoint, re-plans and writes the new plan;
// returns the checkpoint directory to resume from. Throws plait::Error when it cannot.
std::string prepare_restart(const LaunchOptions& o, LaunchState& s, const JobOutcome& job,
                            const std::string& metrics, std::uintmax_t metrics_from, double lock_timeout) {
  const runtime::LostRankNotice& lost = job.launcher_notice ? *job.launcher_notice : *job.announcement;
  const int device = device_of_rank(s.current, s.cluster, lost.rank);
  if (device < 0) {
    throw Error("rank " + std::to_string(lost.rank) + " was lost, but " + s.current.config_path +
                " names no device of " + o.cluster + " for it (parallel.cluster_devices)");
  }
  const std::string device_name = s.cluster.device_name(device);
  // Steps done: the last one the job recorded, or the step an announcing rank named (a kill
  // during a save comes after a step whose line was never written).
  std::int64_t done = last_step_recorded(metrics, metrics_from) + 1;
  if (job.announcement && job.announcement->rank == lost.rank) done = std::max(done, job.announcement->step);
  const double end = job.ended_time;
  say("restart " + std::to_string(s.restarts.size() + 1) + " of " + o.restarts_text + ": rank " +
      std::to_string(lost.rank) + " lost (" +
      (job.launcher_notice ? "mpirun: exited on signal " + std::to_string(lost.signal)
                           : std::string("its own announcement of a SIGKILL")) +
      ") on device " + device_name + " (" + s.cluster.type_of(device).name + "), " + std::to_string(done) +
      " step(s) done; the old job ended " + seconds_text(end - job.notice_time) + " after the failure notice");

  const std::string& root = s.current.job.run.checkpoint->dir;
  const std::string checkpoint = newest_checkpoint(root, lock_timeout);
  if (checkpoint.empty()) {
    throw Error("no verified checkpoint in " + root + " to resume from (the job was lost after " +
                std::to_string(done) + " step(s), before its first save); not restarted");
  }
  const std::int64_t step = checkpoint::checkpoint_dir_step(checkpoint);
  const std::int64_t tokens_per_step = s.current.job.global_train().tokens_per_step();
  Restart r{lost.rank, device_name, step, std::max<std::int64_t>(0, done - step) * tokens_per_step,
            job.notice_time, end, 0, -1};
  say("resuming " + checkpoint + " (step " + std::to_string(step) + ", the newest that verifies); tokens lost: " +
      std::to_string(std::max<std::int64_t>(0, done - step)) + " step(s) x " + std::to_string(tokens_per_step) +
      " tokens = " + std::to_string(r.tokens_lost));

  const double plan_start = monotonic_seconds();
  s.cluster = plan::without_device(s.cluster, device);
  const runtime::TrainConfig& t = s.current.job.run.train;
  plan::JobShape shape;
  shape.model.name = fs::path(s.current.config_path).stem().string();
  shape.model.model = s.current.job.run.model;
  shape.model.source = s.current.config_path;
  shape.seq = t.seq;
  shape.microbatch_size = t.microbatch_size;
  shape.microbatches = s.current.job.global_microbatches();
  shape.tensor_parallel = s.current.plan.vstage_tensor_parallel();
  plan::Replan replan;
  try {
    replan = plan::replan_job(s.current.config, s.cluster, shape);
  } catch (const Error& e) {
    throw Error("the " + std::to_string(s.cluster.num_devices()) + " device(s) that remain without " + device_name +
                " cannot run the job: " + e.what() + "; not restarted");
  }
  s.lost_devices.push_back(device_name);
  std::string suffix = ".without";
  for (std::string d : s.lost_devices) {
    for (char& c : d) c = c == ':' ? '-' : c;
    suffix += "-" + d;
  }
  const std::string path = new_file_beside(o.config, s.base_stem, suffix);
  write_file_atomically(Directory::open(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string()),
                        fs::path(path).filename().string(), replan.config.dump(2) + "\n", AtomicFile::Replace::kNever);
  say("re-planned in " + seconds_text(monotonic_seconds() - plan_start) + " for the " +
      std::to_string(s.cluster.num_devices()) + " device(s) that remain: " + replan.summary + " on " +
      std::to_string(replan.ranks) + " rank(s), predicted step " + milliseconds_text(replan.predicted_step_seconds) +
      "; wrote " + path + " (unchanged: the global batch of " + std::to_string(shape.microbatches) +
      " micro-batches x " + std::to_string(shape.microbatch_size) + " sequence(s) x " + std::to_string(shape.seq) +
      " tokens and the learning-rate schedule of " + std::to_string(t.steps) + " steps)");
  s.current = read_current(path);
  s.restarts.push_back(r);
  return checkpoint;
}

int run_launch(const LaunchOptions& o) {
  const int budget = static_cast<int>(integer_flag("--restarts", o.restarts_text, 0, 1000));
  const double lock_timeout = static_cast<double>(integer_flag("--lock-timeout", o.lock_timeout_text, 0, 86400));
  if (o.cluster.empty()) throw Error("--cluster: required (the cluster spec the plan was made for)");
  if (o.config.empty()) throw Error("--config: required (a plan file, plait plan --out)");
  for (const char* taken : {"--config", "--resume", "--inject-failure", "--allow-recipe-change"}) {
    for (const std::string& a : o.train_args) {
      if (a == taken || a.starts_with(std::string(taken) + "=")) {
        throw Error(std::string(taken) + " after --: plait launch sets it itself (see plait launch --help)");
      }
    }
  }
  LaunchState s{plan::read_cluster_spec(o.cluster), read_current(o.config), fs::path(o.config).stem().string(), {}, {}};
  if (!s.current.job.run.checkpoint) {
    throw InputError(o.config, "checkpoint",
                     "missing; plait launch restarts a job from its checkpoints (give the config a checkpoint "
                     "section with \"dir\" and \"every\")");
  }
  // The job's --metrics file (the user's, or one of our own) tells the steps done.
  std::string metrics = flag_value(o.train_args, "--metrics");
  std::string own_metrics;
  if (metrics.empty()) {
    char name[] = "/tmp/plait-launch-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) throw Error("cannot create a temporary metrics file in /tmp");
    ::close(fd);
    metrics = own_metrics = name;
  }
  struct Remove {
    std::string path;
    ~Remove() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } remove_own{own_metrics};
  install_stop_signal_handlers(-1);

  std::string resume_dir;
  for (std::size_t job_index = 0;; ++job_index) {
    const std::uintmax_t metrics_from = file_size_or_zero(metrics);
    const std::vector<std::string> argv = job_argv(o, s.current, metrics, resume_dir, job_index);
    std::string command;
    for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
    say("starting: " + command);
    Restart* restart = s.restarts.empty() ? nullptr : &s.restarts.back();
    if (restart) restart->started = monotonic_seconds();
    const JobOutcome job = run_job(argv, [&](std::int64_t step) {
      if (!restart || restart->first_step >= 0) return;
      restart->first_step = monotonic_seconds();
      say("restart " + std::to_string(s.restarts.size()) + ": first new step (step " + std::to_string(step) +
          ") done " + seconds_text(restart->first_step - restart->notice) +
          " after the failure notice (old job ending " + seconds_text(restart->ended - restart->notice) +
          ", lock, checkpoint and re-plan " + seconds_text(restart->started - restart->ended) +
          ", new job's start to its first step " + seconds_text(restart->first_step - restart->started) + ")");
    });
    if (job.status == 0) {
      std::string summary;
      std::int64_t lost_tokens = 0;
      for (const Restart& r : s.restarts) {
        summary += (summary.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r.rank) + " on " + r.device +
                   ", resumed at step " + std::to_string(r.resumed_step) + ", " + std::to_string(r.tokens_lost) +
                   " tokens lost, " + (r.first_step >= 0 ? seconds_text(r.first_step - r.notice) : "-") +
                   " to the first new step";
        lost_tokens += r.tokens_lost;
      }
      say("finished on " + std::to_string(s.current.plan.world_size()) + " rank(s) after " + std::to_string(s.restarts.size()) +
          " restart(s)" + (summary.empty() ? "" : " (" + summary + "; " + std::to_string(lost_tokens) + " tokens lost in all)"));
      return 0;
    }
    if (job.forwarded_stop || job.status == runtime::kPreemptedExitStatus) {
      say("the job stopped with exit status " + std::to_string(job.status) +
          (job.status == runtime::kPreemptedExitStatus ? " (preempted: saved; continue with plait launch --resume)" : "") +
          ": passed on, not restarted");
      return job.status;
    }
    if (!job.launcher_notice && !job.announcement) {
      say("the job failed with exit status " + std::to_string(job.status) +
          " and no rank was lost (no \"process rank R ... exited on signal\" notice): not restarted");
      return job.status;
    }
    if (static_cast<int>(s.restarts.size()) >= budget) {
      const runtime::LostRankNotice& lost = job.launcher_notice ? *job.launcher_notice : *job.announcement;
      throw Error("rank " + std::to_string(lost.rank) + " was lost (exit status " +
                  std::to_string(job.status) + "), and the restart budget is spent (--restarts " + o.restarts_text +
                  ", " + std::to_string(s.restarts.size()) + " used): not restarted; continue by hand with plait "
                  "launch --resume --config " + s.current.config_path + " on a cluster spec without the lost device");
    }
    resume_dir = prepare_restart(o, s, job, metrics, metrics_from, lock_timeout);
  }
}

void register_launch(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a planned job under mpirun and restart it when a rank dies: plait launch --cluster C.json\n"
      "--config plan.json [--restarts N] [--mpirun-args \"...\"] [-- <plait train args>] starts\n"
      "`mpirun -np <ranks> plait train --config plan.json` (<ranks>: the plan's, each tensor-parallel\n"
      "rank counting its degree). When a rank is lost (mpirun's \"process rank R ... exited on\n"
      "signal\" notice) it waits for the old job to end and for its checkpoint directory's lock,\n"
      "finds the rank's device in the plan (parallel.cluster_devices and its TP group), plans the\n"
      "cluster without that device for the same model, sequence length, micro-batch size and global\n"
      "batch (train, checkpoint and data sections unchanged: the learning-rate schedule is the same),\n"
      "writes the new plan beside the old one (<name>.without-<device>.json, never over a file) and\n"
      "resumes the newest verified checkpoint with it, up to --restarts times. Every restart is logged\n"
      "with its cause, the lost rank and device, the checkpoint step, the tokens lost and the time\n"
      "from the failure notice to the first new step. Exit status: 0 finished; 75 preempted (passed\n"
      "on, never restarted; SIGUSR1, SIGTERM or SIGINT to plait launch reach the job as SIGUSR1); a\n"
      "failed job that lost no rank: its status; 1 with one line when the budget is spent, no\n"
      "checkpoint exists or the remaining devices cannot be planned. docs/runtime.md, \"Lost ranks:\n"
      "plait launch\".");
  auto o = std::make_shared<LaunchOptions>();
  cmd->add_option("--cluster", o->cluster, "Cluster spec the plan was made for (plait plan --cluster)")
      ->type_name("FILE");
  cmd->add_option("--config", o->config,
                  "Plan file to run (plait plan --out; it needs a checkpoint section): its ranks are the\n"
                  "devices parallel.cluster_devices names (with parallel.tp, each one's TP group)")
      ->type_name("FILE");
  cmd->add_option("--restarts", o->restarts_text, "Restarts allowed after lost ranks (0: none)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--lock-timeout", o->lock_timeout_text,
                  "Seconds to wait for a live holder of the checkpoint directory's lock before a restart\n"
                  "(a lock left by a dead job never blocks)")
      ->type_name("S")
      ->capture_default_str();
  cmd->add_option("--mpirun", o->mpirun, "The MPI launcher")->type_name("PROGRAM")->capture_default_str();
  cmd->add_option("--mpirun-args", o->mpirun_args,
                  "Arguments for mpirun before the program, split at spaces (no quoting), e.g.\n"
                  "\"--hostfile hosts --bind-to none\"; -np is plait launch's")
      ->type_name("\"ARGS\"");
  cmd->add_flag("--resume", o->resume, "The first job resumes the config's checkpoint.dir (plait train --resume)");
  cmd->add_option("train-args", o->train_args,
                  "After --: arguments for every plait train (e.g. --threads 1 --metrics m.jsonl); not\n"
                  "--config, --resume or --allow-recipe-change, which plait launch sets")
      ->type_name("ARGS");
  // Failure tests only: the k-th job's --inject-failure (runtime/failure_injection.h).
  cmd->add_option("--inject-failure", o->inject_failure)->group("");
  cmd->callback([o] {
    const int status = run_launch(*o);
    if (status != 0) throw ExitStatus{status};
  });
}

const CommandRegistration kRegistration(12, register_launch);

}  // namespace
}  // namespace plait::cli
