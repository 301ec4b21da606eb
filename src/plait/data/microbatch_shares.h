#pragma once
// How one step's micro-batches are split among data-parallel replicas, evenly or in
// heterogeneous shares (Zorse: faster replicas take more micro-batches). The step's
// micro-batches carry global indices 0..total()-1; replica r takes count(r) consecutive ones
// starting at first(r). Every rank can compute this from the counts alone, so any rank can
// produce any global micro-batch without coordination.
#include <vector>

namespace plait::data {

class MicrobatchShares {
 public:
  // counts[r] >= 0 micro-batches for replica r; the total must be positive.
  explicit MicrobatchShares(std::vector<int> counts);
  // `total` micro-batches over `replicas`, the first total % replicas replicas taking one more.
  static MicrobatchShares even(int replicas, int total);

  int replicas() const { return static_cast<int>(counts_.size()); }
  int total() const { return firsts_.back(); }
  int count(int replica) const;
  int first(int replica) const;
  // The global index of replica's local micro-batch `local` (0 <= local < count(replica)).
  int global_index(int replica, int local) const;
  // The replica that owns global micro-batch `global`.
  int replica_of(int global) const;

 private:
  std::vector<int> counts_;
  std::vector<int> firsts_;  // firsts_[r] = sum of counts before r; back() = total
};

}  // namespace plait::data
