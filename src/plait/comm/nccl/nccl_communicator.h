#pragma once
// The Communicator over NCCL, for ranks on different GPUs (docs/comm.md, "Between GPUs: NCCL").
// MPI stays the launcher and the control plane: an NcclCommunicator is built over an MPI
// communicator of the same group (its `control`), which carries the NCCL unique id at creation,
// the barrier, every message or reduction whose buffer is in host memory (losses, norms, flags),
// and a small header per NCCL message (below). Buffers in device memory go over NCCL.
//
// Point-to-point. NCCL has no tags: between two ranks, the k-th receive matches the k-th send.
// plait relies on the lowering (schedule/lower) emitting each directed pair's messages in one
// order, which both ends then post in (the executor posts receives in its action list's order).
// Each directed link (from -> to) that the plan uses is a two-rank NCCL communicator of its own
// with its own stream on each end, so that a receive posted early on the link b -> a never
// blocks a send on a -> b (on one shared stream, the early receive would wait for b's send while
// b's stream waits for a's: a deadlock that MPI's independent requests never have). The links
// are made at construction, collectively, from the list every rank passes.
//
// Headers: with every NCCL send, the sender posts an MPI message with the same tag, on a
// duplicate of `control` (so that headers never match host messages that go over `control`
// itself), holding the element count and the send's position on its link; the receive's request
// checks both when the header arrives. A count other than the one expected, or a receive matched
// out of the link's order, fails the request with an error naming both ends, instead of the hang or
// the silently swapped buffers NCCL alone would give. (One small MPI message per activation
// message: microseconds against transfers of megabytes.)
//
// Ordering with compute: every operation first makes its NCCL stream wait for the work enqueued
// so far on `compute` (the stream that produced a send's data, or that must not overwrite a
// receive's buffer). A completed request (test() true, wait() returned) means the transfer is
// done; the caller then launches the consumers.
//
// Collectives (allreduce, broadcast) run on the group's NCCL communicator and stream, in the
// order issued, which must be the same on every rank (as for MPI). create_groups makes NCCL
// communicators for collectives only (ncclCommSplit): point-to-point needs links.
//
// Not thread-safe, like every Communicator. Built only with CUDA and NCCL (PLAIT_HAVE_NCCL).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plait/comm/communicator.h"

namespace plait::comm {

class NcclCommunicator final : public Communicator {
 public:
  // A directed point-to-point channel between group ranks.
  struct Link {
    int from;
    int to;
  };

  // Collective over `control` (every rank of its group calls it, with the same links, in
  // group-rank numbers): a NCCL communicator over the group on the current CUDA device, and one
  // per link this rank is an end of, each with its own stream. `control` must outlive this.
  // Throws plait::Error (on every rank, for a bad link list) naming the problem.
  NcclCommunicator(Communicator& control, const std::vector<Link>& links, cudaStream_t compute,
                   const BackoffPolicy& policy = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return control_->rank(); }
  int size() const override { return control_->size(); }
  int world_rank_of(int rank) const override { return control_->world_rank_of(rank); }
  int max_tag() const override { return control_->max_tag(); }

  Request isend(std::span<const float> data, int peer, int tag) override;
  Request isend(std::span<const std::int32_t> data, int peer, int tag) override;
  Request irecv(std::span<float> data, int peer, int tag) override;
  Request irecv(std::span<std::int32_t> data, int peer, int tag) override;
  Request isend(std::span<const bf16> data, int peer, int tag) override;
  Request irecv(std::span<bf16> data, int peer, int tag) override;
  Request iallreduce(std::span<float> data, ReduceOp op) override;
  Request iallreduce(std::span<double> data, ReduceOp op) override;
  Request iallreduce(std::span<bf16> data, ReduceOp op) override;
  // Uneven blocks, as NCCL has no reduce-scatter or all-gather of unequal counts: one group call
  // of ncclReduce to each block's owner (reduce-scatter) or of ncclBroadcast from it
  // (all-gather), in place.
  Request ireduce_scatter(std::span<float> data, std::span<const std::size_t> counts,
                          ReduceOp op) override;
  Request ireduce_scatter(std::span<bf16> data, std::span<const std::size_t> counts,
                          ReduceOp op) override;
  Request iallgather(std::span<float> data, std::span<const std::size_t> counts) override;
  Request iallgather(std::span<bf16> data, std::span<const std::size_t> counts) override;
  Request ibroadcast(std::span<float> data, int root) override;
  Request ibroadcast(std::span<std::int32_t> data, int root) override;
  // A barrier of the ranks (over control): it orders host calls, not device work.
  Request ibarrier() override;
  std::vector<std::unique_ptr<Communicator>> create_groups(
      const std::vector<std::vector<int>>& groups) override;

  ncclComm_t handle() const { return comm_; }

 private:
  struct Channel;  // one link this rank is an end of

  // A sub-group made by create_groups: its own control communicator and NCCL communicator.
  NcclCommunicator(std::unique_ptr<Communicator> control, ncclComm_t comm, cudaStream_t compute,
                   const BackoffPolicy& policy);

  Request point_to_point(bool is_send, void* data, std::size_t count, ncclDataType_t type,
                         const char* type_name, int peer, int tag);
  Request collective(void* data, std::size_t count, ncclDataType_t type, const char* type_name,
                     const std::string& what, int root, ncclRedOp_t op, bool is_reduction);
  // data: `elements` of `type` (element_bytes each, named type_name in messages).
  Request blocks_collective(void* data, std::size_t elements, ncclDataType_t type,
                            std::size_t element_bytes, const char* type_name,
                            std::span<const std::size_t> counts, const std::string& what,
                            bool reduce, ncclRedOp_t op);
  Channel& channel(bool is_send, int peer, const std::string& what);
  // The event after which `stream` may run: the compute stream's work so far.
  void follow_compute(cudaStream_t stream, const std::string& what);
  void check_peer(int peer, int tag, const std::string& what) const;

  std::unique_ptr<Communicator> owned_control_;
  Communicator* control_;
  std::unique_ptr<Communicator> headers_;  // control's group again, for the headers only
  cudaStream_t compute_;
  BackoffPolicy policy_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the group's collectives
  std::vector<std::unique_ptr<Channel>> channels_;
};

// True when p points to device (or managed) memory: such buffers go over NCCL, others over MPI.
bool is_device_pointer(const void* p);

}  // namespace plait::comm
