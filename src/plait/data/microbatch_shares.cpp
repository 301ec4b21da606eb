#include "plait/data/microbatch_shares.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"

namespace plait::data {

MicrobatchShares::MicrobatchShares(std::vector<int> counts) : counts_(std::move(counts)) {
  if (counts_.empty()) throw Error("micro-batch shares: expected at least one replica, found none");
  firsts_.push_back(0);
  for (std::size_t r = 0; r < counts_.size(); ++r) {
    if (counts_[r] < 0) {
      throw Error("micro-batch shares: replica " + std::to_string(r) +
                  " has a negative count " + std::to_string(counts_[r]));
    }
    firsts_.push_back(firsts_.back() + counts_[r]);
  }
  if (total() <= 0) throw Error("micro-batch shares: expected a positive total, found 0");
}

MicrobatchShares MicrobatchShares::even(int replicas, int total) {
  if (replicas <= 0 || total < replicas) {
    throw Error("micro-batch shares: cannot split " + std::to_string(total) +
                " micro-batches over " + std::to_string(replicas) +
                " replicas (each needs at least one)");
  }
  std::vector<int> counts(replicas, total / replicas);
  for (int r = 0; r < total % replicas; ++r) ++counts[r];
  return MicrobatchShares(std::move(counts));
}

int MicrobatchShares::count(int replica) const {
  if (replica < 0 || replica >= replicas()) {
    throw Error("micro-batch shares: replica " + std::to_string(replica) + " outside [0, " +
                std::to_string(replicas() - 1) + "]");
  }
  return counts_[replica];
}

int MicrobatchShares::first(int replica) const {
  count(replica);  // range check
  return firsts_[replica];
}

int MicrobatchShares::global_index(int replica, int local) const {
  if (local < 0 || local >= count(replica)) {
    throw Error("micro-batch shares: replica " + std::to_string(replica) + " has " +
                std::to_string(count(replica)) + " micro-batches, asked for local index " +
                std::to_string(local));
  }
  return firsts_[replica] + local;
}

int MicrobatchShares::replica_of(int global) const {
  if (global < 0 || global >= total()) {
    throw Error("micro-batch shares: global micro-batch " + std::to_string(global) +
                " outside [0, " + std::to_string(total() - 1) + "]");
  }
  return static_cast<int>(std::upper_bound(firsts_.begin(), firsts_.end(), global) -
                          firsts_.begin()) - 1;
}

}  // namespace plait::data
