#include "plait/core/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plait/core/error.h"

extern char** environ;

namespace plait {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int exit_status(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return 128 + WTERMSIG(raw);
  return 1;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error("ChildProcess: no program");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw Error(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = ::posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  out_ = out[0];
  err_ = err[0];
  if (rc != 0) {
    close_fd(out_);
    close_fd(err_);
    pid_ = -1;
    throw Error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
}

ChildProcess::~ChildProcess() {
  close_fd(out_);
  close_fd(err_);
  if (pid_ > 0 && !waited_) {
    int raw = 0;
    while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
    }
  }
}

int ChildProcess::run(const LineHandler& on_line, const std::function<void()>& on_tick) {
  std::string pending[2];
  int* fds[2] = {&out_, &err_};
  const Stream streams[2] = {Stream::kStdout, Stream::kStderr};
  char buf[65536];
  while (out_ >= 0 || err_ >= 0) {
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int s = 0; s < 2; ++s) {
      if (*fds[s] < 0) continue;
      p[n] = {*fds[s], POLLIN, 0};
      which[n++] = s;
    }
    const int ready = ::poll(p, n, 100);
    if (on_tick) on_tick();
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("poll: ") + std::strerror(errno));
    }
    for (nfds_t i = 0; i < n; ++i) {
      if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const int s = which[i];
      const ssize_t got = ::read(*fds[s], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {  // the child closed it (or it failed): hand on what is left
        if (!pending[s].empty()) on_line(streams[s], pending[s]);
        pending[s].clear();
        close_fd(*fds[s]);
        continue;
      }
      pending[s].append(buf, static_cast<std::size_t>(got));
      std::size_t begin = 0;
      for (std::size_t nl = pending[s].find('\n'); nl != std::string::npos; nl = pending[s].find('\n', begin)) {
        on_line(streams[s], pending[s].substr(begin, nl - begin));
        begin = nl + 1;
      }
      pending[s].erase(0, begin);
    }
  }
  int raw = 0;
  while (true) {
    const pid_t r = ::waitpid(pid_, &raw, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
    if (on_tick) on_tick();
    ::usleep(20000);
  }
  waited_ = true;
  return exit_status(raw);
}

}  // namespace plait
