// The stop-signal handlers (core/stop_signals.h), each case in a forked child so that the test
// process keeps its own signal dispositions: the first signal only sets the flag (the process
// goes on), a second one, of any of the three kinds, ends the process at once by that signal
// after one line on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "plait/core/stop_signals.h"

namespace plait {
namespace {

struct Child {
  int status = 0;
  std::string err;
};

// Runs `body` in a child whose stderr comes back through a pipe; the child exits with what
// body returns (unless a signal ends it first).
template <typename F>
Child in_child(F body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDERR_FILENO);
    ::_exit(body());
  }
  ::close(fds[1]);
  Child c;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) c.err.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, &c.status, 0);
  return c;
}

TEST(StopSignals, TheFirstSignalSetsTheFlagAndTheProcessGoesOn) {
  for (const int first : {SIGUSR1, SIGTERM, SIGINT}) {
    SCOPED_TRACE(stop_signal_name(first));
    const Child c = in_child([first] {
      if (stop_signal() != 0) return 10;
      install_stop_signal_handlers(3);
      if (stop_signal() != 0) return 11;
      std::raise(first);
      return stop_signal() == first ? 0 : 12;
    });
    ASSERT_TRUE(WIFEXITED(c.status)) << c.err;
    EXPECT_EQ(WEXITSTATUS(c.status), 0);
    EXPECT_EQ(c.err, "");  // the handler itself says nothing
  }
}

TEST(StopSignals, ASecondSignalEndsTheProcessAtOnceByThatSignal) {
  for (const auto& [first, second] : {std::pair{SIGUSR1, SIGTERM}, std::pair{SIGTERM, SIGTERM}, std::pair{SIGUSR1, SIGINT}}) {
    SCOPED_TRACE(std::string(stop_signal_name(first)) + " then " + stop_signal_name(second));
    const Child c = in_child([first, second] {
      install_stop_signal_handlers(1);
      std::raise(first);
      std::raise(second);
      return 20;  // not reached: the second signal's default action ends the process
    });
    ASSERT_TRUE(WIFSIGNALED(c.status)) << "exit status " << WEXITSTATUS(c.status);
    EXPECT_EQ(WTERMSIG(c.status), second);
    EXPECT_EQ(c.err, "plait: rank 1: second stop signal: exiting at once, without saving\n");
  }
}

TEST(StopSignals, NamesTheSignals) {
  EXPECT_STREQ(stop_signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_STREQ(stop_signal_name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(stop_signal_name(SIGINT), "SIGINT");
  EXPECT_STREQ(stop_signal_name(SIGHUP), ("signal " + std::to_string(SIGHUP)).c_str());
}

}  // namespace
}  // namespace plait
