#include "plait/comm/stall_watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plait/comm/abort_job.h"
#include "plait/comm/mpi_check.h"
#include "plait/core/monotonic_clock.h"
#include "plait/core/progress.h"

namespace plait::comm {
namespace {

constexpr int kTag = 1;

// What one rank tells the others each interval: its progress counter and activity lines.
struct Heartbeat {
  std::uint64_t count = 0;
  char doing[kProgressLineChars + 1] = {};
  char waiting[kProgressLineChars + 1] = {};
};

void copy_line(char (&to)[kProgressLineChars + 1], const std::string& from) {
  const std::size_t n = std::min(from.size(), kProgressLineChars);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

// This rank's view of one rank of the job.
struct Peer {
  Heartbeat in, out;
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  bool heard = false;
  std::uint64_t count = 0;
  double moved = 0;     // when its counter last moved (this rank's clock)
  double heard_at = 0;  // when its last heartbeat arrived
  std::string doing, waiting;
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string activity(const Peer& p) {
  std::string s = p.doing.empty() ? "starting up" : p.doing;
  if (!p.waiting.empty()) s += ", waiting for " + p.waiting;
  return s;
}

}  // namespace

StallWatchdog::StallWatchdog(double timeout_s, std::string setting)
    : timeout_(timeout_s), setting_(std::move(setting)) {
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "stall watchdog: MPI_Comm_dup");
  thread_ = std::thread([this] { run(); });
}

StallWatchdog::~StallWatchdog() {
  {
    const std::lock_guard lock(stop_mutex_);
    stop_ = true;
  }
  stop_signal_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StallWatchdog::run() {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  std::vector<Peer> peers(static_cast<std::size_t>(size));
  const double start = monotonic_seconds();
  const auto post = [&](int q) {
    MPI_Irecv(&peers[q].in, sizeof(Heartbeat), MPI_BYTE, q, kTag, comm_, &peers[q].recv);
  };
  for (int q = 0; q < size; ++q) {
    peers[q].moved = peers[q].heard_at = start;
    if (q != rank) post(q);
  }
  // Often enough that a stall is seen within a fifth of the timeout; a rank not heard from for
  // `quiet` seconds (several intervals) counts as not responding.
  const double interval = std::clamp(timeout_ / 5, 0.02, 1.0);
  const double quiet = std::max(3 * interval, 1.0);
  Peer& me = peers[static_cast<std::size_t>(rank)];
  for (bool first = true; !stop_; first = false) {
    // The first report goes out at once, so that a rank stopped early is still known. Between
    // reports the thread sleeps (woken early only to stop).
    if (!first) {
      std::unique_lock lock(stop_mutex_);
      stop_signal_.wait_for(lock, std::chrono::duration<double>(interval), [this] { return stop_.load(); });
    }
    if (stop_) break;
    const double now = monotonic_seconds();
    const ProgressSnapshot snap = progress_snapshot();
    if (snap.count != me.count) me.moved = now;
    me.count = snap.count;
    me.doing = snap.doing;
    me.waiting = snap.waiting;
    me.heard = true;
    me.heard_at = now;
    for (int q = 0; q < size; ++q) {
      if (q == rank) continue;
      Peer& p = peers[q];
      for (int done = 1; done;) {  // every heartbeat that has arrived, oldest first
        MPI_Test(&p.recv, &done, MPI_STATUS_IGNORE);
        if (!done) break;
        if (!p.heard || p.in.count != p.count) p.moved = now;
        p.heard = true;
        p.heard_at = now;
        p.count = p.in.count;
        p.in.doing[kProgressLineChars] = p.in.waiting[kProgressLineChars] = '\0';
        p.doing = p.in.doing;
        p.waiting = p.in.waiting;
        post(q);
      }
      // One heartbeat in flight per peer: a stopped peer does not pile them up.
      int sent = 1;
      if (p.send != MPI_REQUEST_NULL) MPI_Test(&p.send, &sent, MPI_STATUS_IGNORE);
      if (!sent) continue;
      p.out.count = me.count;
      copy_line(p.out.doing, me.doing);
      copy_line(p.out.waiting, me.waiting);
      MPI_Isend(&p.out, sizeof(Heartbeat), MPI_BYTE, q, kTag, comm_, &p.send);
    }

    double newest = 0;
    for (const Peer& p : peers) newest = std::max(newest, p.moved);
    const double stalled = now - newest;
    if (stalled < timeout_) continue;
    int reporter = rank;
    for (int q = 0; q < rank; ++q) {
      if (now - peers[q].heard_at <= quiet) {
        reporter = q;
        break;
      }
    }
    if (reporter != rank && stalled < timeout_ + 4 * interval + 2) continue;  // its turn first
    std::string line = "no rank made progress for " + seconds_text(stalled) + " (" + setting_ + " is " +
                       seconds_text(timeout_) + ")";
    for (int q = 0; q < size; ++q) {
      const Peer& p = peers[q];
      line += (q == 0 ? ": " : "; ") + std::string("rank ") + std::to_string(q) + ": ";
      if (now - p.heard_at > quiet) {
        line += "NOT RESPONDING for " + seconds_text(now - p.heard_at) +
                " (stopped, or stuck outside plait's waits)" +
                (p.heard ? "; last heard: " + activity(p) : std::string("; never heard from"));
      } else {
        line += activity(p);
      }
    }
    abort_job(line + "; stopping the job", 1);
  }
  for (int q = 0; q < size; ++q) {
    Peer& p = peers[q];
    if (p.recv != MPI_REQUEST_NULL) {
      MPI_Cancel(&p.recv);
      MPI_Wait(&p.recv, MPI_STATUS_IGNORE);
    }
    if (p.send != MPI_REQUEST_NULL) MPI_Request_free(&p.send);
  }
  MPI_Comm_free(&comm_);
}

}  // namespace plait::comm
