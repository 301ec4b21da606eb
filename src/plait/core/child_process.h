#pragma once
// A child process whose stdout and stderr are read line by line as it runs: plait launch runs
// mpirun so and reads the job's notices while passing every line on (docs/runtime.md, "Lost
// ranks: plait launch").
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace plait {

class ChildProcess {
 public:
  enum class Stream { kStdout, kStderr };
  using LineHandler = std::function<void(Stream stream, const std::string& line)>;

  // Starts argv[0] (searched in PATH) with argv, stdin inherited, stdout and stderr into pipes.
  // Throws plait::Error naming the program when it cannot be started.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // a child still running is waited for (never left a zombie)
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reads both streams until the child has closed them and exited, handing each complete line
  // (without its newline; a last line without one too) to `on_line` as it arrives, and calling
  // `on_tick` at least every 100 ms meanwhile (e.g. to forward a signal). Returns the exit status:
  // the child's, or 128 + N when signal N ended it (as a shell reports it).
  int run(const LineHandler& on_line, const std::function<void()>& on_tick = {});

 private:
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  bool waited_ = false;
};

}  // namespace plait
