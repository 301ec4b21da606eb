#pragma once
// The Communicator over MPI (OpenMPI or any MPI-3 library): nonblocking point-to-point and
// collectives (MPI_Isend/Irecv, MPI_Iallreduce, MPI_Ireduce_scatter, MPI_Iallgatherv,
// MPI_Ibcast, MPI_Ibarrier), every wait a yielding MPI_Test loop (backoff.h), errors returned (MPI_ERRORS_RETURN) and thrown as
// plait::Error naming the operation, the peer's world rank and the tag.
#include <mpi.h>

#include <string>
#include <vector>

#include "plait/comm/communicator.h"

namespace plait::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed on destruction) and sets MPI_ERRORS_RETURN on it.
  MpiCommunicator(MPI_Comm comm, const BackoffPolicy& policy);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_ranks_.size()); }
  int world_rank_of(int rank) const override;
  int max_tag() const override { return max_tag_; }

  Request isend(std::span<const float> data, int peer, int tag) override;
  Request isend(std::span<const std::int32_t> data, int peer, int tag) override;
  Request irecv(std::span<float> data, int peer, int tag) override;
  Request irecv(std::span<std::int32_t> data, int peer, int tag) override;
  Request isend(std::span<const bf16> data, int peer, int tag) override;
  Request irecv(std::span<bf16> data, int peer, int tag) override;
  Request iallreduce(std::span<float> data, ReduceOp op) override;
  Request iallreduce(std::span<double> data, ReduceOp op) override;
  Request iallreduce(std::span<bf16> data, ReduceOp op) override;
  Request ireduce_scatter(std::span<float> data, std::span<const std::size_t> counts,
                          ReduceOp op) override;
  Request ireduce_scatter(std::span<bf16> data, std::span<const std::size_t> counts,
                          ReduceOp op) override;
  Request iallgather(std::span<float> data, std::span<const std::size_t> counts) override;
  Request iallgather(std::span<bf16> data, std::span<const std::size_t> counts) override;
  Request ibroadcast(std::span<float> data, int root) override;
  Request ibroadcast(std::span<std::int32_t> data, int root) override;
  Request ibarrier() override;
  std::vector<std::unique_ptr<Communicator>> create_groups(
      const std::vector<std::vector<int>>& groups) override;

  MPI_Comm handle() const { return comm_; }

 private:
  Request allgather_blocks(void* data, std::size_t size, MPI_Datatype type, const char* type_name,
                           std::span<const std::size_t> counts);
  Request point_to_point(bool is_send, void* data, std::size_t count, MPI_Datatype type,
                         const char* type_name, int peer, int tag);
  Request reduce(void* data, std::size_t count, MPI_Datatype type, const char* type_name,
                 ReduceOp op);
  Request reduce_scatter_blocks(void* data, std::size_t size, std::size_t element_bytes, MPI_Datatype type,
                                const char* type_name, std::span<const std::size_t> counts, ReduceOp op);
  // MPI's operation for `op` on `type` (the bf16 sum for bf16 words; other ops refused there).
  MPI_Op mpi_op(ReduceOp op, MPI_Datatype type, const std::string& what);
  Request bcast(void* data, std::size_t count, MPI_Datatype type, const char* type_name,
                int root);
  // The counts and displacements of a blocked collective, checked against `data` and INT_MAX.
  void block_layout(std::span<const std::size_t> counts, std::size_t size, const std::string& what,
                    std::vector<int>& ints, std::vector<int>& displacements) const;
  void check_peer(int peer, int tag, const std::string& what) const;
  int checked_count(std::size_t count, const std::string& what) const;

  MPI_Comm comm_;
  BackoffPolicy policy_;
  int rank_ = 0;
  int max_tag_ = 32767;
  std::vector<int> world_ranks_;  // group rank -> world rank
  MPI_Op bf16_sum_ = MPI_OP_NULL;  // comm/bf16_sum.h as an MPI operation, made at first use
};

}  // namespace plait::comm
