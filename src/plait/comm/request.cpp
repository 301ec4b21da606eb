#include "plait/comm/request.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "plait/core/progress.h"

namespace plait::comm {

Request::Request(std::unique_ptr<PendingOperation> operation, const BackoffPolicy& policy)
    : operation_(std::move(operation)), policy_(policy) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    drop();
    operation_ = std::move(other.operation_);
    policy_ = other.policy_;
  }
  return *this;
}

Request::~Request() { drop(); }

void Request::drop() noexcept {
  if (operation_ == nullptr) return;
  if (std::uncaught_exceptions() == 0) {
    // One write, so that lines from several ranks do not interleave.
    const std::string line =
        "plait: warning: " + operation_->describe() + " was dropped before it completed\n";
    std::fputs(line.c_str(), stderr);
  }
  operation_->abandon();
  operation_.reset();
}

bool Request::test() {
  if (operation_ == nullptr) return true;
  bool complete = false;
  try {
    complete = operation_->test();
  } catch (...) {
    // A failed operation is over: nothing is left to wait for or to cancel.
    operation_.reset();
    throw;
  }
  if (complete) operation_.reset();
  return complete;
}

void Request::wait() {
  if (test()) return;
  // Long waits are what the stall watchdog reports: say what this one waits for.
  note_waiting(describe());
  Backoff backoff(policy_);
  while (!test()) backoff.pause();
  note_wait_over();
}

std::string Request::describe() const {
  return operation_ == nullptr ? std::string() : operation_->describe();
}

bool test_all(std::span<Request> requests) {
  bool all_complete = true;
  for (Request& r : requests) {
    if (!r.test()) all_complete = false;
  }
  return all_complete;
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

std::optional<std::size_t> wait_any(std::span<Request> requests) {
  std::optional<Backoff> backoff;
  bool waiting = false;
  for (;;) {
    bool any_active = false;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!requests[i].active()) continue;
      any_active = true;
      if (!backoff) backoff.emplace(requests[i].backoff_policy());
      if (requests[i].test()) {
        if (waiting) note_wait_over();
        return i;
      }
    }
    if (!any_active) return std::nullopt;
    if (!waiting) {
      for (const Request& r : requests) {
        if (r.active()) {
          note_waiting("one of several operations, e.g. " + r.describe());
          break;
        }
      }
      waiting = true;
    }
    backoff->pause();
  }
}

}  // namespace plait::comm
