#pragma once
// A disk that fills up, without a file system of that size: RLIMIT_FSIZE makes write(2) fail
// with EFBIG past a size, where a full disk fails it with ENOSPC; plait's writers take both
// the same way. In a child process, so that the limit stays there.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <string>

namespace plait::test {

// Runs `f` in a child whose files may not grow past `bytes`; returns the message of the
// exception it threw, "" when it returned, "(no result)" when the child died otherwise.
inline std::string error_under_file_size_limit(rlim_t bytes, const std::function<void()>& f) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "(no pipe)";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails instead of killing
    const rlimit limit{bytes, bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::string message;
    try {
      f();
    } catch (const std::exception& e) {
      message = e.what();
    }
    if (::write(pipe_fds[1], message.data(), message.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? message : "(no result)";
}

}  // namespace plait::test
