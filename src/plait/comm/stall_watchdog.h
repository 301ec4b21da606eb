#pragma once
// Ends a job whose ranks have all stopped making progress: a rank stopped by a signal
// (SIGSTOP, a debugger, a frozen node), or every rank waiting on another in a deadlocked
// exchange, would otherwise hang the job forever, since a rank that waits polls and never fails.
//
// Each rank runs a thread that, every interval (timeout / 5, at most 1 s), reads this process's
// progress board (core/progress.h: a counter and what the rank does or waits on), sends it to
// every other rank on a communicator of its own, and reads theirs. When no rank's counter has
// moved for `timeout_s` seconds, the lowest rank still heard from writes one line naming every
// rank with what it was doing or waiting on (a rank whose reports stopped arriving is named as
// not responding) and aborts the job (comm::abort_job: MPI_Abort, exit status 1). A higher rank
// reports itself if the stall outlasts the lower one's chance to, a few intervals more.
//
// Progress is anything the board counts: a compute action, a finished wait, a checkpoint or
// shard block read or written. So the timeout must exceed the longest single piece of work a
// rank does without marking progress (one compute action, normally milliseconds to seconds).
//
// Needs MPI_THREAD_MULTIPLE (the thread calls MPI while the main thread does); MpiSession
// provides it when asked. The messages are a few hundred bytes per pair of ranks per interval.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <mpi.h>

namespace plait::comm {

class StallWatchdog {
 public:
  // Collective over MPI_COMM_WORLD (duplicates it); call from the main thread of every rank.
  // `setting` names where the timeout comes from, for the report ("train.stall_timeout_s").
  StallWatchdog(double timeout_s, std::string setting);
  // Stops the thread; not collective (ranks stop at different moments; heartbeats still on the
  // way are dropped with the communicator).
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  double timeout_seconds() const { return timeout_; }

 private:
  void run();

  double timeout_;
  std::string setting_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<bool> stop_{false};
  std::mutex stop_mutex_;
  std::condition_variable stop_signal_;
  std::thread thread_;
};

}  // namespace plait::comm
