#pragma once
// Measures the links between the ranks of a job and the collectives of its groups, so a real
// cluster's spec is measured rather than typed (`mpirun -np N plait profile links`; the cluster
// spec's link form is plan/measured_links.h).
//
// Pairs: every pair of ranks in turn, one pair at a time while the others wait at a barrier (so
// no two pairs share a link or a core), ping-pongs messages of each size with the runtime's own
// nonblocking sends and receives and waits, as its pipeline messages see them. The one-way time
// is half a round trip, the median over `trips` after one warm-up trip. The link is the
// simulator's alpha-beta model t = latency + bytes / bandwidth (sim::LinkProfile):
//   latency   = the one-way time of the smallest size;
//   bandwidth = 1 / slope of the least-squares line of one-way time against bytes over the sizes.
// Collectives: for each group, an all-reduce (sum) of each size and a reduce-scatter of the same
// bytes in equal blocks; a trip starts after a barrier of the group, its time is the slowest
// member's, and the figure is the median over trips, with its own alpha-beta line (the bytes
// being the buffer's, not what the algorithm moves).
#include <cstddef>
#include <string>
#include <vector>

#include "plait/comm/communicator.h"
#include "plait/sim/device_profile.h"

namespace plait::runtime {

struct LinkProbeOptions {
  std::vector<std::size_t> sizes = {4, 64 << 10, 1 << 20, 4 << 20};  // bytes, ascending
  int trips = 20;
  // Groups of world ranks whose collectives to time besides the whole job and each host's ranks
  // (e.g. a plan's data-parallel groups).
  std::vector<std::vector<int>> groups;
};

struct MeasuredPair {
  int a = 0, b = 0;                     // world ranks, a < b
  std::vector<double> one_way_seconds;  // per size
  sim::LinkProfile link;
};

struct MeasuredCollective {
  std::vector<int> ranks;  // world ranks, ascending
  std::string what;        // "job", "host <name>", "group"
  std::vector<double> allreduce_seconds, reduce_scatter_seconds;  // per size
  sim::LinkProfile allreduce, reduce_scatter;
};

struct LinkMeasurements {
  std::vector<std::string> hosts;  // per rank
  std::vector<std::size_t> sizes;
  std::vector<MeasuredPair> pairs;  // (0,1), (0,2), ..., (n-2, n-1)
  std::vector<MeasuredCollective> collectives;
};

// Collective over `world`: every rank passes its own host name and the same options; every rank
// gets the whole result. Throws plait::Error for sizes not ascending or below 4 bytes, trips < 1,
// or a group naming a rank outside the job.
LinkMeasurements measure_links(comm::Communicator& world, const std::string& host,
                               const LinkProbeOptions& options = {});

// The alpha-beta line through (bytes, seconds) as above: latency the first time, bandwidth the
// inverse least-squares slope; when the times do not grow with the bytes (noise), the largest
// size's bytes over its time.
sim::LinkProfile alpha_beta(const std::vector<std::size_t>& bytes, const std::vector<double>& seconds);

}  // namespace plait::runtime
