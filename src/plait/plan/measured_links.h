#pragma once
// Measured links (`mpirun -np N plait profile links`, runtime/link_profiler.h) in the cluster
// spec's link form (cluster_spec.h), so a real cluster's spec is measured rather than typed:
//   {"machines": [{"name": <host>, "devices": [{"type": <device_type>, "count": <ranks there>}],
//                  "link": <median of the host's measured pairs>}, ...],
//    "network": <median of the pairs between hosts>,          (several hosts only)
//    "links": [{"between": ["<host>:<i>", "<host>:<j>"], "gbyte_per_s": ..., "latency_us": ...},
//              ... every measured pair]}
// Machines come in the order of their first rank; rank r is device <host of r>:<its index among
// that host's ranks, in rank order>. Add "device_types" (and "name", "precision") and the
// document is a cluster file: cluster.link(a, b) is then the measured pair's link.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plait/sim/device_profile.h"

namespace plait::plan {

struct MeasuredLink {
  int a = 0, b = 0;  // ranks
  sim::LinkProfile link;
};

// The device name ("host:index") of each rank.
std::vector<std::string> measured_device_names(const std::vector<std::string>& rank_hosts);

nlohmann::json measured_links_json(const std::vector<std::string>& rank_hosts,
                                   const std::vector<MeasuredLink>& pairs,
                                   const std::string& device_type = "host");

// {"gbyte_per_s": ..., "latency_us": ...}, as cluster files give a link.
nlohmann::json link_json(const sim::LinkProfile& link);

}  // namespace plait::plan
