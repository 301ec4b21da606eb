#include "plait/plan/remaining_cluster.h"

#include "plait/core/error.h"

namespace plait::plan {

int find_device(const ClusterSpec& cluster, const std::string& name) {
  for (int d = 0; d < cluster.num_devices(); ++d) {
    if (cluster.device_name(d) == name) return d;
  }
  return -1;
}

ClusterSpec without_device(const ClusterSpec& cluster, int device) {
  if (device < 0 || device >= cluster.num_devices()) {
    throw Error("device " + std::to_string(device) + " is not one of the " + std::to_string(cluster.num_devices()) +
                " devices of " + cluster.path);
  }
  if (cluster.num_devices() == 1) {
    throw Error(cluster.path + ": " + cluster.device_name(device) + " is the cluster's last device; none remains");
  }
  const int lost_machine = cluster.devices[static_cast<std::size_t>(device)].machine;
  const bool machine_empties = cluster.machines[static_cast<std::size_t>(lost_machine)].devices.size() == 1;
  // Old index -> new index (-1: removed), for devices and machines.
  const auto renumber = [](int old, int removed) { return old == removed ? -1 : old > removed ? old - 1 : old; };
  const auto new_machine = [&](int m) { return machine_empties ? renumber(m, lost_machine) : m; };

  ClusterSpec c = cluster;
  c.devices.clear();
  c.machines.clear();
  c.overrides.clear();
  for (int m = 0; m < static_cast<int>(cluster.machines.size()); ++m) {
    if (new_machine(m) < 0) continue;
    Machine machine = cluster.machines[static_cast<std::size_t>(m)];
    machine.devices.clear();
    c.machines.push_back(std::move(machine));
  }
  for (int d = 0; d < cluster.num_devices(); ++d) {
    if (d == device) continue;
    ClusterDevice kept = cluster.devices[static_cast<std::size_t>(d)];  // `local` kept: its name stays
    kept.machine = new_machine(kept.machine);
    c.machines[static_cast<std::size_t>(kept.machine)].devices.push_back(c.num_devices());
    c.devices.push_back(kept);
  }
  for (ClusterSpec::PairLink o : cluster.overrides) {
    const auto index = [&](int i) { return o.machines ? new_machine(i) : renumber(i, device); };
    o.a = index(o.a);
    o.b = index(o.b);
    if (o.a >= 0 && o.b >= 0) c.overrides.push_back(o);
  }
  return c;
}

}  // namespace plait::plan
