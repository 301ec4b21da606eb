#pragma once
// The transport interface: point-to-point messages and collectives over one group of ranks.
//
// The runtime sees only this class; MpiCommunicator (mpi_communicator.h) implements it over
// MPI and a NCCL implementation can be added with the same signatures. A communicator spans a
// group: the whole job (MpiSession::world()) or a subgroup made by create_groups(), such as
// the ranks holding one pipeline stage (its data-parallel replicas) or the first and last
// stage (tied embedding). Ranks and peers are always numbered within the communicator.
//
// Buffers are caller-owned and must stay alive, untouched (sends: unmodified), until the
// request completes. Not thread-safe: one thread at a time may call into a communicator and
// its requests (MPI_THREAD_SERIALIZED, see mpi_session.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plait/core/bf16.h"

#include "plait/comm/request.h"

namespace plait::comm {

enum class ReduceOp { kSum, kMax, kMin };

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank's number in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The job-wide (world) rank of group rank `rank`, for messages that name a rank.
  virtual int world_rank_of(int rank) const = 0;
  // The largest tag a message may carry (MPI guarantees at least 32767).
  virtual int max_tag() const = 0;

  // Nonblocking point-to-point. A receive must name the exact element count that was sent;
  // a different count fails the request with an error naming both. Messages between one pair
  // of ranks with the same tag arrive in the order they were sent; different tags match
  // independently of order.
  virtual Request isend(std::span<const float> data, int peer, int tag) = 0;
  virtual Request isend(std::span<const std::int32_t> data, int peer, int tag) = 0;
  virtual Request irecv(std::span<float> data, int peer, int tag) = 0;
  virtual Request irecv(std::span<std::int32_t> data, int peer, int tag) = 0;
  // bf16 stage messages (spec/precision_policy.h), moved as 16-bit words.
  virtual Request isend(std::span<const bf16> data, int peer, int tag) = 0;
  virtual Request irecv(std::span<bf16> data, int peer, int tag) = 0;

  // Nonblocking in-place reduction across the group: every rank ends with the elementwise
  // op over all ranks' data. Sums are in the transport's order (not bitwise reproducible
  // across group sizes). Max and min of a NaN are unspecified; reduce with kSum (which
  // propagates NaN and Inf) or reduce a 0/1 flag to detect non-finite values.
  virtual Request iallreduce(std::span<float> data, ReduceOp op) = 0;
  virtual Request iallreduce(std::span<double> data, ReduceOp op) = 0;
  // bf16 gradients (train.grad_reduce "bf16"): kSum only, each partial sum computed in fp32 and
  // rounded to bf16 (comm/bf16_sum.h); every rank ends with the same bytes.
  virtual Request iallreduce(std::span<bf16> data, ReduceOp op) = 0;
  // Nonblocking in-place collectives over blocks of uneven sizes (ZeRO's reduce-scatter of
  // gradients and all-gather of parameters, Rajbhandari et al., arXiv 1910.02054). `data` holds
  // sum(counts) elements on every rank, laid out as block 0 (counts[0] elements), block 1, ...;
  // block r is group rank r's, at offset counts[0] + ... + counts[r-1]. `counts` has one entry
  // per rank (zeros allowed) and is the same list on every rank; it is copied.
  //   ireduce_scatter: when the request completes, this rank's block holds the elementwise op
  //     over every rank's block; the other blocks of `data` are unspecified.
  //   iallgather: this rank's block is copied into its place on every rank; the other blocks
  //     are overwritten with their owners' blocks.
  virtual Request ireduce_scatter(std::span<float> data, std::span<const std::size_t> counts,
                                  ReduceOp op) = 0;
  virtual Request iallgather(std::span<float> data, std::span<const std::size_t> counts) = 0;
  // The reduce-scatter of bf16 gradient blocks (kSum only, as iallreduce of bf16 above).
  virtual Request ireduce_scatter(std::span<bf16> data, std::span<const std::size_t> counts,
                                  ReduceOp op) = 0;
  // The same for bf16 blocks (the compute copy of sharded weights).
  virtual Request iallgather(std::span<bf16> data, std::span<const std::size_t> counts) = 0;
  // Nonblocking broadcast of root's data to every rank of the group.
  virtual Request ibroadcast(std::span<float> data, int root) = 0;
  virtual Request ibroadcast(std::span<std::int32_t> data, int root) = 0;
  // Completes on a rank once every rank of the group has started it.
  virtual Request ibarrier() = 0;

  // Collective over this communicator: every rank passes the same list of groups (ranks of
  // this communicator, in the order that becomes the group's rank order; groups may overlap
  // and differ in size). Returns one entry per group: a communicator where this rank is a
  // member, nullptr where it is not. Throws plait::Error on every rank if a group is empty,
  // repeats a rank or names one out of range, or if the ranks' lists differ.
  virtual std::vector<std::unique_ptr<Communicator>> create_groups(
      const std::vector<std::vector<int>>& groups) = 0;

  // Blocking forms: the nonblocking call followed by a yielding wait.
  void allreduce(std::span<float> data, ReduceOp op) { iallreduce(data, op).wait(); }
  void allreduce(std::span<double> data, ReduceOp op) { iallreduce(data, op).wait(); }
  void broadcast(std::span<float> data, int root) { ibroadcast(data, root).wait(); }
  void broadcast(std::span<std::int32_t> data, int root) { ibroadcast(data, root).wait(); }
  void barrier() { ibarrier().wait(); }
  // One scalar reduced over the group (loss reporting, global gradient norm, flags).
  double allreduce(double value, ReduceOp op);

  // "ranks {0, 2, 4}" in world ranks: names the group in messages.
  std::string describe_members() const;
};

}  // namespace plait::comm
