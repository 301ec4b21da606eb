#include "plait/comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>

#include "plait/comm/bf16_sum.h"
#include "plait/comm/mpi_check.h"
#include "plait/core/error.h"

namespace plait::comm {
namespace {

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

// An MPI group freed when it goes out of scope, also when an error is thrown.
struct OwnedGroup {
  MPI_Group group = MPI_GROUP_NULL;
  OwnedGroup() = default;
  OwnedGroup(const OwnedGroup&) = delete;
  OwnedGroup& operator=(const OwnedGroup&) = delete;
  ~OwnedGroup() {
    if (group != MPI_GROUP_NULL && !mpi_finalized()) MPI_Group_free(&group);
  }
};

enum class OperationKind { kSend, kReceive, kCollective };

// One MPI request. Receives check the element count that arrived against the one expected,
// since a pipeline stage that receives a wrongly shaped activation must fail, not compute on
// a partly filled buffer.
class MpiOperation final : public PendingOperation {
 public:
  MpiOperation(OperationKind kind, std::string description, MPI_Datatype type,
               const char* type_name, int expected_count)
      : kind_(kind),
        description_(std::move(description)),
        type_(type),
        type_name_(type_name),
        expected_count_(expected_count) {}

  MPI_Request* handle() { return &request_; }
  // Arrays a nonblocking collective reads until it completes (MPI-3.1 sec. 5.12: they must not
  // change before then), kept with the request.
  std::vector<int>& counts() { return counts_; }
  std::vector<int>& displacements() { return displacements_; }
  // Runs once, when test() first sees the operation complete.
  void set_on_complete(std::function<void()> f) { on_complete_ = std::move(f); }

  bool test() override {
    int done = 0;
    MPI_Status status;
    const int code = MPI_Test(&request_, &done, &status);
    if (code != MPI_SUCCESS) {
      int error_class = 0;
      MPI_Error_class(code, &error_class);
      if (error_class == MPI_ERR_TRUNCATE) {
        throw Error(description_ + ": the message holds more than the expected " +
                    std::to_string(expected_count_) + " " + type_name_);
      }
      check_mpi(code, description_);
    }
    if (done == 0) return false;
    if (on_complete_) std::exchange(on_complete_, nullptr)();
    if (kind_ == OperationKind::kReceive) {
      int count = 0;
      check_mpi(MPI_Get_count(&status, type_, &count), description_);
      if (count != expected_count_) {
        throw Error(description_ + ": expected " + std::to_string(expected_count_) + " " +
                    type_name_ + ", received " + std::to_string(count));
      }
    }
    return true;
  }

  void abandon() noexcept override {
    if (request_ == MPI_REQUEST_NULL || mpi_finalized()) return;
    if (kind_ == OperationKind::kReceive) MPI_Cancel(&request_);
    // MPI-3.1 section 5.12: a nonblocking collective's request may be neither cancelled nor
    // freed, so an abandoned collective is left to complete or to die with the job.
    if (kind_ != OperationKind::kCollective) MPI_Request_free(&request_);
  }

  std::string describe() const override { return description_; }

 private:
  OperationKind kind_;
  std::string description_;
  MPI_Datatype type_;
  const char* type_name_;
  int expected_count_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::vector<int> counts_, displacements_;
  std::function<void()> on_complete_;
};

MPI_Op to_mpi(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  throw Error("unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

// comm/bf16_sum.h over MPI's 16-bit words: MPI calls it with `in` and `inout` of `len` elements.
void bf16_sum_words(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto n = static_cast<std::size_t>(*len);
  bf16_sum_into(std::span<const bf16>(static_cast<const bf16*>(in), n), std::span<bf16>(static_cast<bf16*>(inout), n));
}

const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

std::string list_string(const std::vector<int>& ranks) {
  std::string s = "{";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s + "}";
}

// FNV-1a (Fowler, Noll, Vo) over the group list, to check that every rank passed the same one.
std::uint64_t fingerprint(const std::vector<std::vector<int>>& groups) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::uint64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(groups.size());
  for (const std::vector<int>& g : groups) {
    mix(g.size());
    for (int r : g) mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(r)));
  }
  return h;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const BackoffPolicy& policy)
    : comm_(comm), policy_(policy) {
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int size = 0;
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size), "MPI_Comm_size");

  OwnedGroup group;
  OwnedGroup world_group;
  check_mpi(MPI_Comm_group(comm_, &group.group), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group.group), "MPI_Comm_group(world)");
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  world_ranks_.resize(ranks.size());
  check_mpi(MPI_Group_translate_ranks(group.group, size, ranks.data(), world_group.group,
                                      world_ranks_.data()),
            "MPI_Group_translate_ranks");

  // The tag bound is an attribute of MPI_COMM_WORLD (MPI-3.1 section 8.1.2).
  void* value = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found), "MPI_TAG_UB");
  if (found != 0) max_tag_ = *static_cast<int*>(value);
}

MpiCommunicator::~MpiCommunicator() {
  if (mpi_finalized()) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
}

MPI_Op MpiCommunicator::mpi_op(ReduceOp op, MPI_Datatype type, const std::string& what) {
  if (type != MPI_UINT16_T) return to_mpi(op);
  // Only reductions of bf16 words come here (16-bit words are otherwise only moved).
  if (op != ReduceOp::kSum) throw Error(what + ": bf16 words reduce by sum only, found " + name_of(op));
  if (bf16_sum_ == MPI_OP_NULL) {
    check_mpi(MPI_Op_create(&bf16_sum_words, /*commute=*/1, &bf16_sum_), what);
  }
  return bf16_sum_;
}

int MpiCommunicator::world_rank_of(int rank) const {
  if (rank < 0 || rank >= size()) {
    throw Error("rank " + std::to_string(rank) + " is not in the group of " +
                std::to_string(size()) + " ranks (" + describe_members() + ")");
  }
  return world_ranks_[static_cast<std::size_t>(rank)];
}

void MpiCommunicator::check_peer(int peer, int tag, const std::string& what) const {
  if (peer < 0 || peer >= size()) {
    throw Error(what + ": peer " + std::to_string(peer) + " is outside the group of " +
                std::to_string(size()) + " ranks (" + describe_members() + ")");
  }
  if (tag < 0 || tag > max_tag_) {
    throw Error(what + ": tag " + std::to_string(tag) + " is outside 0.." +
                std::to_string(max_tag_));
  }
}

int MpiCommunicator::checked_count(std::size_t count, const std::string& what) const {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw Error(what + ": " + std::to_string(count) +
                " elements exceed one MPI message's limit of " + std::to_string(INT_MAX));
  }
  return static_cast<int>(count);
}

Request MpiCommunicator::point_to_point(bool is_send, void* data, std::size_t count,
                                        MPI_Datatype type, const char* type_name, int peer,
                                        int tag) {
  const std::string head = std::string(is_send ? "send of " : "receive of ") +
                           std::to_string(count) + " " + type_name;
  check_peer(peer, tag, head);
  const std::string what = head + (is_send ? " to rank " : " from rank ") +
                           std::to_string(world_rank_of(peer)) + " (tag " +
                           std::to_string(tag) + ")";
  const int n = checked_count(count, what);
  auto op = std::make_unique<MpiOperation>(
      is_send ? OperationKind::kSend : OperationKind::kReceive, what, type, type_name, n);
  check_mpi(is_send ? MPI_Isend(data, n, type, peer, tag, comm_, op->handle())
                    : MPI_Irecv(data, n, type, peer, tag, comm_, op->handle()),
            what);
  return Request(std::move(op), policy_);
}

Request MpiCommunicator::reduce(void* data, std::size_t count, MPI_Datatype type,
                                const char* type_name, ReduceOp op) {
  const std::string what = std::string("allreduce (") + name_of(op) + ") of " +
                           std::to_string(count) + " " + type_name + " over " +
                           describe_members();
  const int n = checked_count(count, what);
  auto pending =
      std::make_unique<MpiOperation>(OperationKind::kCollective, what, type, type_name, n);
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, n, type, mpi_op(op, type, what), comm_, pending->handle()),
            what);
  return Request(std::move(pending), policy_);
}

void MpiCommunicator::block_layout(std::span<const std::size_t> counts, std::size_t size,
                                   const std::string& what, std::vector<int>& ints,
                                   std::vector<int>& displacements) const {
  if (counts.size() != static_cast<std::size_t>(this->size())) {
    throw Error(what + ": expected one block count per rank (" + std::to_string(this->size()) +
                "), found " + std::to_string(counts.size()));
  }
  std::size_t total = 0;
  for (std::size_t c : counts) {
    displacements.push_back(checked_count(total, what));
    ints.push_back(checked_count(c, what));
    total += c;
  }
  checked_count(total, what);
  if (total != size) {
    throw Error(what + ": the blocks hold " + std::to_string(total) + " elements but the buffer has " +
                std::to_string(size));
  }
}

Request MpiCommunicator::ireduce_scatter(std::span<float> data, std::span<const std::size_t> counts,
                                         ReduceOp op) {
  return reduce_scatter_blocks(data.data(), data.size(), sizeof(float), MPI_FLOAT, "floats", counts, op);
}

Request MpiCommunicator::ireduce_scatter(std::span<bf16> data, std::span<const std::size_t> counts,
                                         ReduceOp op) {
  return reduce_scatter_blocks(data.data(), data.size(), sizeof(bf16), MPI_UINT16_T, "bf16s", counts, op);
}

Request MpiCommunicator::reduce_scatter_blocks(void* data, std::size_t size, std::size_t element_bytes,
                                               MPI_Datatype type, const char* type_name,
                                               std::span<const std::size_t> counts, ReduceOp op) {
  const std::string what = std::string("reduce-scatter (") + name_of(op) + ") of " + std::to_string(size) + " " +
                           type_name + " over " + describe_members();
  const MPI_Op mpi = mpi_op(op, type, what);
  auto pending = std::make_unique<MpiOperation>(OperationKind::kCollective, what, type, type_name,
                                                static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  block_layout(counts, size, what, pending->counts(), pending->displacements());
  // In place, MPI leaves this rank's reduced block at the START of the buffer (MPI-3.1 sec.
  // 5.10.1: the input is taken from the receive buffer, which receives counts[rank] elements);
  // on completion it is moved to the block's own place, so blocks never change position.
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)] * element_bytes;
  const std::size_t offset =
      static_cast<std::size_t>(pending->displacements()[static_cast<std::size_t>(rank_)]) * element_bytes;
  if (offset > 0 && mine > 0) {
    char* base = static_cast<char*>(data);
    pending->set_on_complete([base, offset, mine] { std::memmove(base + offset, base, mine); });
  }
  check_mpi(MPI_Ireduce_scatter(MPI_IN_PLACE, data, pending->counts().data(), type, mpi, comm_, pending->handle()),
            what);
  return Request(std::move(pending), policy_);
}

Request MpiCommunicator::allgather_blocks(void* data, std::size_t size, MPI_Datatype type,
                                          const char* type_name,
                                          std::span<const std::size_t> counts) {
  const std::string what = "all-gather of " + std::to_string(size) + " " + type_name + " over " + describe_members();
  auto pending = std::make_unique<MpiOperation>(OperationKind::kCollective, what, type, type_name,
                                                static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  block_layout(counts, size, what, pending->counts(), pending->displacements());
  // In place: each rank's contribution is already where it receives its own block (MPI-3.1
  // sec. 5.7).
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, pending->counts().data(),
                            pending->displacements().data(), type, comm_, pending->handle()),
            what);
  return Request(std::move(pending), policy_);
}

Request MpiCommunicator::iallgather(std::span<float> data, std::span<const std::size_t> counts) {
  return allgather_blocks(data.data(), data.size(), MPI_FLOAT, "floats", counts);
}

// bf16 needs no arithmetic in transit: 16-bit words (MPI has no bfloat16 type before MPI 4.1).
Request MpiCommunicator::iallgather(std::span<bf16> data, std::span<const std::size_t> counts) {
  return allgather_blocks(data.data(), data.size(), MPI_UINT16_T, "bf16s", counts);
}

Request MpiCommunicator::bcast(void* data, std::size_t count, MPI_Datatype type,
                               const char* type_name, int root) {
  const std::string what = "broadcast of " + std::to_string(count) + " " + type_name +
                           " from group rank " + std::to_string(root) + " over " +
                           describe_members();
  if (root < 0 || root >= size()) {
    throw Error(what + ": the root is outside the group of " + std::to_string(size()) +
                " ranks");
  }
  const int n = checked_count(count, what);
  auto pending =
      std::make_unique<MpiOperation>(OperationKind::kCollective, what, type, type_name, n);
  check_mpi(MPI_Ibcast(data, n, type, root, comm_, pending->handle()), what);
  return Request(std::move(pending), policy_);
}

// MPI_Isend only reads its buffer; the cast lets sends and receives share one path.
Request MpiCommunicator::isend(std::span<const float> data, int peer, int tag) {
  return point_to_point(true, const_cast<float*>(data.data()), data.size(), MPI_FLOAT, "floats",
                        peer, tag);
}
Request MpiCommunicator::isend(std::span<const std::int32_t> data, int peer, int tag) {
  return point_to_point(true, const_cast<std::int32_t*>(data.data()), data.size(), MPI_INT32_T,
                        "int32s", peer, tag);
}
Request MpiCommunicator::isend(std::span<const bf16> data, int peer, int tag) {
  return point_to_point(true, const_cast<bf16*>(data.data()), data.size(), MPI_UINT16_T, "bf16s",
                        peer, tag);
}
Request MpiCommunicator::irecv(std::span<bf16> data, int peer, int tag) {
  return point_to_point(false, data.data(), data.size(), MPI_UINT16_T, "bf16s", peer, tag);
}
Request MpiCommunicator::irecv(std::span<float> data, int peer, int tag) {
  return point_to_point(false, data.data(), data.size(), MPI_FLOAT, "floats", peer, tag);
}
Request MpiCommunicator::irecv(std::span<std::int32_t> data, int peer, int tag) {
  return point_to_point(false, data.data(), data.size(), MPI_INT32_T, "int32s", peer, tag);
}
Request MpiCommunicator::iallreduce(std::span<float> data, ReduceOp op) {
  return reduce(data.data(), data.size(), MPI_FLOAT, "floats", op);
}
Request MpiCommunicator::iallreduce(std::span<double> data, ReduceOp op) {
  return reduce(data.data(), data.size(), MPI_DOUBLE, "doubles", op);
}
Request MpiCommunicator::iallreduce(std::span<bf16> data, ReduceOp op) {
  return reduce(data.data(), data.size(), MPI_UINT16_T, "bf16s", op);
}
Request MpiCommunicator::ibroadcast(std::span<float> data, int root) {
  return bcast(data.data(), data.size(), MPI_FLOAT, "floats", root);
}
Request MpiCommunicator::ibroadcast(std::span<std::int32_t> data, int root) {
  return bcast(data.data(), data.size(), MPI_INT32_T, "int32s", root);
}

Request MpiCommunicator::ibarrier() {
  const std::string what = "barrier over " + describe_members();
  auto pending =
      std::make_unique<MpiOperation>(OperationKind::kCollective, what, MPI_BYTE, "bytes", 0);
  check_mpi(MPI_Ibarrier(comm_, pending->handle()), what);
  return Request(std::move(pending), policy_);
}

std::vector<std::unique_ptr<Communicator>> MpiCommunicator::create_groups(
    const std::vector<std::vector<int>>& groups) {
  // First agree that every rank holds the same list: one reduction of (h, ~h) with max gives
  // (max h, ~min h), equal halves exactly when all ranks' fingerprints agree. Checking before
  // validating means every rank throws the same error, so none is left waiting.
  const std::uint64_t h = fingerprint(groups);
  std::uint64_t extremes[2] = {h, ~h};
  reduce(extremes, 2, MPI_UINT64_T, "uint64s", ReduceOp::kMax).wait();
  if (extremes[0] != ~extremes[1]) {
    throw Error("create_groups over " + describe_members() +
                ": the ranks passed different group lists; every rank must pass the same "
                "list (built from the same plan)");
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::vector<int>& g = groups[i];
    const std::string where = "create_groups: group " + std::to_string(i) + " " + list_string(g);
    if (g.empty()) throw Error(where + ": a group needs at least one rank");
    std::vector<bool> seen(static_cast<std::size_t>(size()), false);
    for (int r : g) {
      if (r < 0 || r >= size()) {
        throw Error(where + ": rank " + std::to_string(r) + " is outside 0.." +
                    std::to_string(size() - 1));
      }
      if (seen[static_cast<std::size_t>(r)]) {
        throw Error(where + ": rank " + std::to_string(r) + " appears twice");
      }
      seen[static_cast<std::size_t>(r)] = true;
    }
  }

  // Every rank walks the list in the same order and joins the groups it belongs to, so
  // overlapping groups cannot wait on each other in a cycle.
  OwnedGroup parent;
  check_mpi(MPI_Comm_group(comm_, &parent.group), "create_groups: MPI_Comm_group");
  std::vector<std::unique_ptr<Communicator>> result(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::vector<int>& g = groups[i];
    bool member = false;
    for (int r : g) member = member || r == rank_;
    if (!member) continue;
    const std::string where = "create_groups: group " + std::to_string(i) + " " + list_string(g);
    OwnedGroup subgroup;
    check_mpi(MPI_Group_incl(parent.group, static_cast<int>(g.size()), g.data(), &subgroup.group),
              where);
    MPI_Comm comm = MPI_COMM_NULL;
    // The tag keeps concurrent creations apart; any value within the tag bound will do.
    const int tag = static_cast<int>(i % (static_cast<std::size_t>(max_tag_) + 1));
    check_mpi(MPI_Comm_create_group(comm_, subgroup.group, tag, &comm), where);
    result[i] = std::make_unique<MpiCommunicator>(comm, policy_);
  }
  return result;
}

}  // namespace plait::comm
