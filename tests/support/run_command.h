#pragma once
// Running the plait executable under test (PLAIT_BINARY, a compile definition of every test
// target) as a user would, through the shell, with its exit status, stdout and stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/temp_dir.h"

namespace plait::test {

struct CommandResult {
  int status = -1;  // the exit status; -1 when the command did not exit normally (a signal)
  std::string out, err;
};

// Runs `command` with `sh -c`; stdout and stderr are captured through files under the test's
// temporary directory (named after the process, the running test and a counter, so that tests
// running side by side never share one), removed afterwards.
inline CommandResult run_command(const std::string& command) {
  static int calls = 0;
  const std::string stem = ::testing::TempDir() + "/plait_command_" + std::to_string(::getpid()) + "_" +
                           current_test_name() + "_" + std::to_string(++calls);
  const std::string out = stem + ".out", err = stem + ".err";
  const int raw = std::system((command + " >" + out + " 2>" + err).c_str());
  CommandResult r;
  r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = file_bytes(out);
  r.err = file_bytes(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// `plait <args>`, e.g. run_plait("sim --pp 2"); `env` is prepended ("OMP_NUM_THREADS=1").
inline CommandResult run_plait(const std::string& args, const std::string& env = "") {
  return run_command((env.empty() ? "" : env + " ") + PLAIT_BINARY + " " + args);
}

}  // namespace plait::test
