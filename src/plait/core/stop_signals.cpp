#include "plait/core/stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

namespace plait {
namespace {

// Written by the handler only; read by the training loop.
volatile std::sig_atomic_t first_signal = 0;
// The second signal's line, formatted at installation (snprintf is not async-signal-safe).
char second_line[160];
std::size_t second_length = 0;

constexpr int kStopSignals[] = {SIGUSR1, SIGTERM, SIGINT};

// Only async-signal-safe calls (POSIX.1-2017 2.4.3): write, signal, raise.
extern "C" void on_stop_signal(int signal) {
  if (first_signal == 0) {
    first_signal = signal;
    return;
  }
  const ssize_t ignored = ::write(STDERR_FILENO, second_line, second_length);
  (void)ignored;
  std::signal(signal, SIG_DFL);
  std::raise(signal);  // delivered when the handler returns: the default action ends the process
}

}  // namespace

void install_stop_signal_handlers(int rank) {
  char prefix[32] = "";
  if (rank >= 0) std::snprintf(prefix, sizeof prefix, "rank %d: ", rank);
  const int n = std::snprintf(second_line, sizeof second_line,
                              "plait: %ssecond stop signal: exiting at once, without saving\n", prefix);
  second_length = n > 0 ? static_cast<std::size_t>(n) : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  // One stop signal at a time: a second one waits until the first's handler has set the flag.
  for (const int s : kStopSignals) sigaddset(&action.sa_mask, s);
  for (const int s : kStopSignals) sigaction(s, &action, nullptr);
}

int stop_signal() { return first_signal; }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: {
      static thread_local char text[24];
      std::snprintf(text, sizeof text, "signal %d", signal);
      return text;
    }
  }
}

}  // namespace plait
