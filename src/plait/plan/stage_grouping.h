#pragma once
// Which devices share a pipeline stage (a data-parallel group), bandwidth-aware.
//
// Islands: devices joined by links faster than the cluster's slowest tier (single-linkage
// clustering by bandwidth: the components left when every link at the slowest bandwidth is cut),
// i.e. machines on an Ethernet cluster, NVLink pairs inside a PCIe machine. A stage never splits
// an island unless the pipeline needs more stages than there are islands; then islands are
// halved along their device order. (Zorse splits with repeated Stoer-Wagner minimum cuts of the
// bandwidth graph; on large clusters a minimum total-weight cut isolates a single device rather
// than a machine: for a 4-GPU node at 8 GB/s inside, 60 other GPUs at 3.125 GB/s, cutting one GPU
// off costs 3 x 8 + 60 x 3.125 = 211.5 GB/s of links, the whole node 4 x 60 x 3.125 = 750. The
// bottleneck criterion used here keeps machines whole.)
//
// Candidate groupings, each a list of groups in pipeline order:
//   - type-pure: each device type split into 0 (unused), 1, 2, 4, ... stages of whole islands,
//     balanced by device count (every combination of types);
//   - mixed: all islands spread over P stages balancing their aggregate speed (longest
//     processing time first), P = 1, 2, 3, 4, 6, 8, ...;
//   - small clusters (at most 5 islands): every ordered partition of the islands.
// Groups are ordered by their smallest device memory, largest first (stage 0 holds the most
// in-flight activations), ties by the bandwidth to the previous stage; the reverse order is also
// offered.
#include <vector>

#include "plait/plan/cluster_spec.h"

namespace plait::plan {

using Grouping = std::vector<std::vector<int>>;

// Islands among `devices` (each sorted, in order of their first device).
std::vector<std::vector<int>> bandwidth_islands(const ClusterSpec& cluster, const std::vector<int>& devices);

// Candidate groupings of `devices` into at most max_groups stages. `speed[d]` is a relative
// speed of device d (indexed by cluster device id), used to balance mixed stages.
std::vector<Grouping> stage_groupings(const ClusterSpec& cluster, const std::vector<int>& devices,
                                      const std::vector<double>& speed, int max_groups);

// Orders groups for the pipeline: smallest device memory descending, ties by bandwidth.
Grouping order_groups(const ClusterSpec& cluster, Grouping groups);

}  // namespace plait::plan
