#include "plait/comm/nccl/nccl_communicator.h"

#include <array>
#include <utility>

#include "plait/core/error.h"

namespace plait::comm {
namespace {

void check_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess) return;
  std::string detail = ncclGetErrorString(result);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') detail += " (" + std::string(last) + ")";
  }
  throw Error(what + ": NCCL error: " + detail);
}

void check_cuda_call(cudaError_t code, const std::string& what) {
  if (code != cudaSuccess) {
    throw Error(what + ": " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
  }
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  throw Error("unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

// The header of one NCCL message, sent over control with the message's tag: its element count
// and its position on its link, each as two 32-bit words (low, high).
using Header = std::array<std::int32_t, 4>;

Header make_header(std::uint64_t count, std::uint64_t position) {
  return {static_cast<std::int32_t>(count & 0xffffffffu), static_cast<std::int32_t>(count >> 32),
          static_cast<std::int32_t>(position & 0xffffffffu),
          static_cast<std::int32_t>(position >> 32)};
}
std::uint64_t word_pair(std::int32_t low, std::int32_t high) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(low)) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(high)) << 32);
}

// FNV-1a over the link list, kept to 52 bits so that it travels exactly in a double.
double fingerprint(const std::vector<NcclCommunicator::Link>& links) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::uint64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(links.size());
  for (const auto& l : links) {
    mix(static_cast<std::uint32_t>(l.from));
    mix(static_cast<std::uint32_t>(l.to));
  }
  return static_cast<double>(h & ((std::uint64_t{1} << 52) - 1));
}

// One NCCL operation: complete when the event recorded after it on its stream has passed and,
// for point-to-point, its header has been sent (sends) or received and checked (receives).
class NcclOperation final : public PendingOperation {
 public:
  enum class Kind { kSend, kReceive, kCollective };

  NcclOperation(Kind kind, std::string description, ncclComm_t comm)
      : kind_(kind), description_(std::move(description)), comm_(comm) {
    check_cuda_call(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), description_);
  }
  ~NcclOperation() override {
    // Destroying an event whose work is still pending is allowed (its resources go when done).
    if (done_) cudaEventDestroy(done_);
  }
  NcclOperation(const NcclOperation&) = delete;
  NcclOperation& operator=(const NcclOperation&) = delete;

  cudaEvent_t event() const { return done_; }
  Header& header() { return header_; }
  void set_header_request(Request request, std::uint64_t expected_count,
                          std::uint64_t expected_position) {
    header_request_ = std::move(request);
    expected_count_ = expected_count;
    expected_position_ = expected_position;
  }

  bool test() override {
    if (header_request_.active()) {
      if (!header_request_.test()) return false;
      if (kind_ == Kind::kReceive) check_header();
    }
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async), description_, comm_);
    if (async != ncclSuccess && async != ncclInProgress) check_nccl(async, description_, comm_);
    const cudaError_t state = cudaEventQuery(done_);
    if (state == cudaErrorNotReady) return false;
    check_cuda_call(state, description_);
    return true;
  }

  // NCCL operations cannot be cancelled: the transfer runs on or dies with the job. The header's
  // MPI request is abandoned with header_request_.
  void abandon() noexcept override {}

  std::string describe() const override { return description_; }

 private:
  void check_header() const {
    const std::uint64_t count = word_pair(header_[0], header_[1]);
    const std::uint64_t position = word_pair(header_[2], header_[3]);
    if (count != expected_count_) {
      throw Error(description_ + ": expected " + std::to_string(expected_count_) +
                  " elements, the matching send has " + std::to_string(count));
    }
    if (position != expected_position_) {
      throw Error(description_ + ": this is receive #" + std::to_string(expected_position_) +
                  " on its NCCL link but matched send #" + std::to_string(position) +
                  "; NCCL pairs a link's messages by order only, so receives must be posted in "
                  "the order of the peer's sends");
    }
  }

  Kind kind_;
  std::string description_;
  ncclComm_t comm_;
  cudaEvent_t done_ = nullptr;
  Header header_{};
  Request header_request_;
  std::uint64_t expected_count_ = 0;
  std::uint64_t expected_position_ = 0;
};

ncclConfig_t split_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.splitShare = 1;  // the links share the group communicator's resources (less memory)
  return config;
}

}  // namespace

// One link this rank is an end of: its two-rank NCCL communicator (the link's `from` is NCCL rank
// 0 in it, `to` rank 1), its stream on this rank, and how many messages it has carried.
struct NcclCommunicator::Channel {
  Link link;
  bool sending = false;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::uint64_t messages = 0;
};

bool is_device_pointer(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // not a pointer CUDA knows: host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

NcclCommunicator::NcclCommunicator(Communicator& control, const std::vector<Link>& links,
                                   cudaStream_t compute, const BackoffPolicy& policy)
    : control_(&control), compute_(compute), policy_(policy) {
  const std::string where = "NcclCommunicator over " + control.describe_members();
  // Every rank must pass the same links (NCCL would hang otherwise): agree first, then validate,
  // so that every rank throws the same error.
  const double h = fingerprint(links);
  if (control.allreduce(h, ReduceOp::kMax) != control.allreduce(h, ReduceOp::kMin)) {
    throw Error(where +
                ": the ranks passed different link lists; every rank must pass the "
                "same list (built from the same lowered schedule)");
  }
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    const bool in_range = l.from >= 0 && l.from < size() && l.to >= 0 && l.to < size();
    if (!in_range || l.from == l.to) {
      throw Error(where + ": link " + std::to_string(i) + " (" + std::to_string(l.from) + " -> " +
                  std::to_string(l.to) + ") must join two different ranks of the group");
    }
    for (std::size_t k = 0; k < i; ++k) {
      if (links[k].from == l.from && links[k].to == l.to) {
        throw Error(where + ": link " + std::to_string(l.from) + " -> " + std::to_string(l.to) +
                    " is listed twice");
      }
    }
  }
  ncclUniqueId id{};
  if (rank() == 0) check_nccl(ncclGetUniqueId(&id), where + ": ncclGetUniqueId");
  static_assert(sizeof(ncclUniqueId) % sizeof(std::int32_t) == 0);
  control.broadcast(std::span<std::int32_t>(reinterpret_cast<std::int32_t*>(&id),
                                            sizeof(id) / sizeof(std::int32_t)),
                    0);
  if (!links.empty()) {
    // The same ranks in their own matching context: a header can only match a header.
    std::vector<int> everyone(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
    headers_ = std::move(control.create_groups({everyone})[0]);
  }
  check_cuda_call(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), where);
  check_nccl(ncclCommInitRank(&comm_, size(), id, rank()), where + ": ncclCommInitRank");
  // Every rank walks the list in the same order: each split is collective over the group.
  for (const Link& l : links) {
    const bool member = rank() == l.from || rank() == l.to;
    ncclConfig_t config = split_config();
    ncclComm_t pair = nullptr;
    check_nccl(ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, rank() == l.from ? 0 : 1,
                             &pair, &config),
               where + ": ncclCommSplit for link " + std::to_string(l.from) + " -> " +
                   std::to_string(l.to),
               comm_);
    if (!member) continue;
    auto ch = std::make_unique<Channel>();
    ch->link = l;
    ch->sending = rank() == l.from;
    ch->comm = pair;
    check_cuda_call(cudaStreamCreateWithFlags(&ch->stream, cudaStreamNonBlocking), where);
    channels_.push_back(std::move(ch));
  }
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> control, ncclComm_t comm,
                                   cudaStream_t compute, const BackoffPolicy& policy)
    : owned_control_(std::move(control)),
      control_(owned_control_.get()),
      compute_(compute),
      policy_(policy),
      comm_(comm) {
  check_cuda_call(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                  "NcclCommunicator over " + control_->describe_members());
}

NcclCommunicator::~NcclCommunicator() {
  // No throwing here: errors of a torn-down job were reported by the operation that met them.
  for (auto& ch : channels_) {
    cudaStreamSynchronize(ch->stream);
    ncclCommDestroy(ch->comm);
    cudaStreamDestroy(ch->stream);
  }
  if (stream_) cudaStreamSynchronize(stream_);
  if (comm_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::check_peer(int peer, int tag, const std::string& what) const {
  if (peer < 0 || peer >= size()) {
    throw Error(what + ": peer " + std::to_string(peer) + " is outside the group of " +
                std::to_string(size()) + " ranks (" + describe_members() + ")");
  }
  if (tag < 0 || tag > max_tag()) {
    throw Error(what + ": tag " + std::to_string(tag) + " is outside 0.." +
                std::to_string(max_tag()));
  }
}

NcclCommunicator::Channel& NcclCommunicator::channel(bool is_send, int peer,
                                                     const std::string& what) {
  for (auto& ch : channels_) {
    const Link& l = ch->link;
    if (is_send && ch->sending && l.to == peer) return *ch;
    if (!is_send && !ch->sending && l.from == peer) return *ch;
  }
  const int from = is_send ? rank() : peer, to = is_send ? peer : rank();
  throw Error(what + ": no NCCL link " + std::to_string(from) + " -> " + std::to_string(to) +
              "; the links are made when the communicator is built, from the lowered schedule's "
              "pairs");
}

void NcclCommunicator::follow_compute(cudaStream_t stream, const std::string& what) {
  cudaEvent_t produced = nullptr;
  check_cuda_call(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming), what);
  const cudaError_t recorded = cudaEventRecord(produced, compute_);
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(stream, produced, 0) : recorded;
  cudaEventDestroy(produced);
  check_cuda_call(waited, what + ": ordering after the compute stream");
}

Request NcclCommunicator::point_to_point(bool is_send, void* data, std::size_t count,
                                         ncclDataType_t type, const char* type_name, int peer,
                                         int tag) {
  const std::string head =
      std::string(is_send ? "send of " : "receive of ") + std::to_string(count) + " " + type_name;
  check_peer(peer, tag, head);
  const std::string what = head + (is_send ? " to rank " : " from rank ") +
                           std::to_string(world_rank_of(peer)) + " (tag " + std::to_string(tag) +
                           ") over NCCL";
  Channel& ch = channel(is_send, peer, what);
  const std::uint64_t position = ch.messages++;
  auto op = std::make_unique<NcclOperation>(
      is_send ? NcclOperation::Kind::kSend : NcclOperation::Kind::kReceive, what, ch.comm);
  // The header first: the peer learns the count and position whatever happens to the transfer.
  Header& header = op->header();
  if (is_send) {
    header = make_header(count, position);
    op->set_header_request(headers_->isend(std::span<const std::int32_t>(header), peer, tag), count,
                           position);
  } else {
    op->set_header_request(headers_->irecv(std::span<std::int32_t>(header), peer, tag), count,
                           position);
  }
  follow_compute(ch.stream, what);
  // In the link's communicator `from` is rank 0 and `to` rank 1.
  check_nccl(is_send ? ncclSend(data, count, type, 1, ch.comm, ch.stream)
                     : ncclRecv(data, count, type, 0, ch.comm, ch.stream),
             what, ch.comm);
  check_cuda_call(cudaEventRecord(op->event(), ch.stream), what);
  return Request(std::move(op), policy_);
}

Request NcclCommunicator::collective(void* data, std::size_t count, ncclDataType_t type,
                                     const char* type_name, const std::string& what, int root,
                                     ncclRedOp_t op, bool is_reduction) {
  const std::string full = what + " of " + std::to_string(count) + " " + type_name + " over " +
                           describe_members() + " (NCCL)";
  if (!is_reduction && (root < 0 || root >= size())) {
    throw Error(full + ": the root " + std::to_string(root) + " is outside the group of " +
                std::to_string(size()) + " ranks");
  }
  auto pending = std::make_unique<NcclOperation>(NcclOperation::Kind::kCollective, full, comm_);
  follow_compute(stream_, full);
  check_nccl(is_reduction ? ncclAllReduce(data, data, count, type, op, comm_, stream_)
                          : ncclBroadcast(data, data, count, type, root, comm_, stream_),
             full, comm_);
  check_cuda_call(cudaEventRecord(pending->event(), stream_), full);
  return Request(std::move(pending), policy_);
}

// Buffers in host memory take the control plane (MPI); device buffers NCCL.
Request NcclCommunicator::isend(std::span<const float> data, int peer, int tag) {
  if (!is_device_pointer(data.data())) return control_->isend(data, peer, tag);
  return point_to_point(true, const_cast<float*>(data.data()), data.size(), ncclFloat32, "floats",
                        peer, tag);
}
Request NcclCommunicator::isend(std::span<const std::int32_t> data, int peer, int tag) {
  if (!is_device_pointer(data.data())) return control_->isend(data, peer, tag);
  return point_to_point(true, const_cast<std::int32_t*>(data.data()), data.size(), ncclInt32,
                        "int32s", peer, tag);
}
Request NcclCommunicator::irecv(std::span<float> data, int peer, int tag) {
  if (!is_device_pointer(data.data())) return control_->irecv(data, peer, tag);
  return point_to_point(false, data.data(), data.size(), ncclFloat32, "floats", peer, tag);
}
Request NcclCommunicator::irecv(std::span<std::int32_t> data, int peer, int tag) {
  if (!is_device_pointer(data.data())) return control_->irecv(data, peer, tag);
  return point_to_point(false, data.data(), data.size(), ncclInt32, "int32s", peer, tag);
}

Request NcclCommunicator::isend(std::span<const bf16> data, int peer, int tag) {
  if (!is_device_pointer(data.data())) return control_->isend(data, peer, tag);
  return point_to_point(true, const_cast<bf16*>(data.data()), data.size(), ncclBfloat16, "bf16s",
                        peer, tag);
}
Request NcclCommunicator::irecv(std::span<bf16> data, int peer, int tag) {
  if (!is_device_pointer(data.data())) return control_->irecv(data, peer, tag);
  return point_to_point(false, data.data(), data.size(), ncclBfloat16, "bf16s", peer, tag);
}

Request NcclCommunicator::iallreduce(std::span<float> data, ReduceOp op) {
  if (!is_device_pointer(data.data())) return control_->iallreduce(data, op);
  return collective(data.data(), data.size(), ncclFloat32, "floats", "allreduce", 0, to_nccl(op),
                    true);
}
Request NcclCommunicator::iallreduce(std::span<double> data, ReduceOp op) {
  if (!is_device_pointer(data.data())) return control_->iallreduce(data, op);
  return collective(data.data(), data.size(), ncclFloat64, "doubles", "allreduce", 0, to_nccl(op),
                    true);
}
// NCCL's bf16 sum rounds each partial sum to bf16 (to nearest even), as comm/bf16_sum.h does.
Request NcclCommunicator::iallreduce(std::span<bf16> data, ReduceOp op) {
  if (!is_device_pointer(data.data())) return control_->iallreduce(data, op);
  if (op != ReduceOp::kSum) throw Error("allreduce of bf16s over " + describe_members() + ": bf16 reduces by sum only");
  return collective(data.data(), data.size(), ncclBfloat16, "bf16s", "allreduce", 0, ncclSum, true);
}
Request NcclCommunicator::blocks_collective(void* data, std::size_t elements, ncclDataType_t type,
                                            std::size_t element_bytes, const char* type_name,
                                            std::span<const std::size_t> counts,
                                            const std::string& what, bool reduce,
                                            ncclRedOp_t op) {
  const std::string full = what + " of " + std::to_string(elements) + " " + type_name + " in " +
                           std::to_string(counts.size()) + " blocks over " + describe_members() +
                           " (NCCL)";
  if (counts.size() != static_cast<std::size_t>(size())) {
    throw Error(full + ": expected one block count per rank (" + std::to_string(size()) +
                "), found " + std::to_string(counts.size()));
  }
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  if (total != elements) {
    throw Error(full + ": the blocks hold " + std::to_string(total) +
                " elements but the buffer has " + std::to_string(elements));
  }
  auto pending = std::make_unique<NcclOperation>(NcclOperation::Kind::kCollective, full, comm_);
  follow_compute(stream_, full);
  // One group: NCCL runs the per-block operations together (no ordering among them to deadlock).
  check_nccl(ncclGroupStart(), full);
  std::size_t offset = 0;
  ncclResult_t result = ncclSuccess;
  for (int r = 0; r < size() && result == ncclSuccess; ++r) {
    const std::size_t n = counts[static_cast<std::size_t>(r)];
    void* block = static_cast<char*>(data) + offset * element_bytes;
    offset += n;
    if (n == 0) continue;
    result = reduce ? ncclReduce(block, block, n, type, op, r, comm_, stream_)
                    : ncclBroadcast(block, block, n, type, r, comm_, stream_);
  }
  const ncclResult_t ended = ncclGroupEnd();
  check_nccl(result != ncclSuccess ? result : ended, full, comm_);
  check_cuda_call(cudaEventRecord(pending->event(), stream_), full);
  return Request(std::move(pending), policy_);
}

Request NcclCommunicator::ireduce_scatter(std::span<float> data,
                                          std::span<const std::size_t> counts, ReduceOp op) {
  if (!is_device_pointer(data.data())) return control_->ireduce_scatter(data, counts, op);
  return blocks_collective(data.data(), data.size(), ncclFloat32, sizeof(float), "floats", counts,
                           "reduce-scatter", true, to_nccl(op));
}

Request NcclCommunicator::ireduce_scatter(std::span<bf16> data, std::span<const std::size_t> counts,
                                          ReduceOp op) {
  if (!is_device_pointer(data.data())) return control_->ireduce_scatter(data, counts, op);
  if (op != ReduceOp::kSum) throw Error("reduce-scatter of bf16s over " + describe_members() + ": bf16 reduces by sum only");
  return blocks_collective(data.data(), data.size(), ncclBfloat16, sizeof(bf16), "bf16s", counts,
                           "reduce-scatter", true, ncclSum);
}

Request NcclCommunicator::iallgather(std::span<float> data, std::span<const std::size_t> counts) {
  if (!is_device_pointer(data.data())) return control_->iallgather(data, counts);
  return blocks_collective(data.data(), data.size(), ncclFloat32, sizeof(float), "floats", counts,
                           "all-gather", false, ncclSum);
}

Request NcclCommunicator::iallgather(std::span<bf16> data, std::span<const std::size_t> counts) {
  if (!is_device_pointer(data.data())) return control_->iallgather(data, counts);
  return blocks_collective(data.data(), data.size(), ncclBfloat16, sizeof(bf16), "bf16s", counts,
                           "all-gather", false, ncclSum);
}

Request NcclCommunicator::ibroadcast(std::span<float> data, int root) {
  if (!is_device_pointer(data.data())) return control_->ibroadcast(data, root);
  return collective(data.data(), data.size(), ncclFloat32, "floats", "broadcast", root, ncclSum,
                    false);
}
Request NcclCommunicator::ibroadcast(std::span<std::int32_t> data, int root) {
  if (!is_device_pointer(data.data())) return control_->ibroadcast(data, root);
  return collective(data.data(), data.size(), ncclInt32, "int32s", "broadcast", root, ncclSum,
                    false);
}

Request NcclCommunicator::ibarrier() { return control_->ibarrier(); }

std::vector<std::unique_ptr<Communicator>> NcclCommunicator::create_groups(
    const std::vector<std::vector<int>>& groups) {
  // The control plane validates the list and agrees on it first (every rank throws alike).
  std::vector<std::unique_ptr<Communicator>> controls = control_->create_groups(groups);
  std::vector<std::unique_ptr<Communicator>> result(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const bool member = controls[i] != nullptr;
    ncclConfig_t config = split_config();
    ncclComm_t sub = nullptr;
    check_nccl(ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR,
                             member ? controls[i]->rank() : 0, &sub, &config),
               "create_groups (NCCL): group " + std::to_string(i), comm_);
    if (!member) continue;
    result[i] = std::unique_ptr<Communicator>(
        new NcclCommunicator(std::move(controls[i]), sub, compute_, policy_));
  }
  return result;
}

}  // namespace plait::comm
