#pragma once
// A communication operation in flight and the ways to wait for it.
//
// A Request owns one PendingOperation, which each transport (MPI now, NCCL later) implements.
// Waiting is transport-independent: poll test(), and between polls give the core away with
// Backoff (backoff.h), so waiting ranks never spin.
//
// Progress: OpenMPI advances nonblocking collectives (MPI_Iallreduce) only inside MPI calls.
// Code that overlaps a reduction with compute should call test() on the outstanding requests
// between pieces of work (test_all does it for a batch); otherwise the reduction makes little
// progress until the wait.
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "plait/comm/backoff.h"

namespace plait::comm {

// One transport operation; implemented by each transport.
class PendingOperation {
 public:
  virtual ~PendingOperation() = default;
  // Advances the operation; true once it is complete. Throws plait::Error when it completed
  // wrongly (a transport error, a received size other than the one expected).
  virtual bool test() = 0;
  // Gives the operation up without waiting (its owner was dropped before it completed):
  // receives are cancelled, sends and collectives are left to finish or die with the job.
  virtual void abandon() noexcept = 0;
  // "receive of 64 floats from rank 3 (tag 7)": for errors and warnings.
  virtual std::string describe() const = 0;
};

// Move-only handle of one operation. An empty (default-constructed) request is complete.
//
// Dropping a request that is still active abandons its operation (see PendingOperation) and
// never blocks: a rank that throws must reach its abort handler, not wait forever on a peer.
// Outside exception unwinding that is a bug, so it prints a warning naming the operation.
class Request {
 public:
  Request() = default;
  Request(std::unique_ptr<PendingOperation> operation, const BackoffPolicy& policy);
  Request(Request&& other) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  // True while the operation has not been seen complete.
  bool active() const { return operation_ != nullptr; }
  // Advances the operation once; true (and the request becomes inactive) when it is complete.
  bool test();
  // Returns when the operation is complete, polling with backoff.
  void wait();
  // Describes the operation ("" when inactive).
  std::string describe() const;
  // How wait() paces its polls (set by the communicator that made the request).
  const BackoffPolicy& backoff_policy() const { return policy_; }

 private:
  void drop() noexcept;

  std::unique_ptr<PendingOperation> operation_;
  BackoffPolicy policy_;
};

// Tests every active request once; true when none is left active.
bool test_all(std::span<Request> requests);
// Waits until every request is complete.
void wait_all(std::span<Request> requests);
// Waits until one active request completes and returns its index (that request becomes
// inactive, so repeated calls return each index once); nullopt when none was active.
std::optional<std::size_t> wait_any(std::span<Request> requests);

}  // namespace plait::comm
