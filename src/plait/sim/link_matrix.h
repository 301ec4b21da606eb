#pragma once
// The link between every pair of ranks of a cluster (a heterogeneous cluster has NVLink or PCIe
// inside a machine and slower Ethernet between machines, possibly per pair). Empty: every message
// uses its sender's device link (DeviceProfile::link).
#include <cstddef>
#include <vector>

#include "plait/sim/device_profile.h"

namespace plait::sim {

class LinkMatrix {
 public:
  LinkMatrix() = default;
  LinkMatrix(int ranks, const LinkProfile& fill)
      : ranks_(ranks), links_(static_cast<std::size_t>(ranks) * ranks, fill) {}

  bool empty() const { return ranks_ == 0; }
  int ranks() const { return ranks_; }
  LinkProfile& at(int src, int dst) { return links_.at(static_cast<std::size_t>(src) * ranks_ + dst); }
  const LinkProfile& at(int src, int dst) const {
    return links_.at(static_cast<std::size_t>(src) * ranks_ + dst);
  }

 private:
  int ranks_ = 0;
  std::vector<LinkProfile> links_;
};

}  // namespace plait::sim
