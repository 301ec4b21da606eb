#pragma once
// The cluster that remains when a device is lost (plait launch, docs/runtime.md "Lost ranks:
// plait launch"): the same spec without that device. Devices keep their names ("host:3" stays
// "host:3" when "host:1" is gone), so a plan made for the remaining cluster names the same
// devices as the one it replaces, and a second loss is found by name again.
#include <string>

#include "plait/plan/cluster_spec.h"

namespace plait::plan {

// The index of the device named `name` ("machine:index", ClusterSpec::device_name), or -1.
int find_device(const ClusterSpec& cluster, const std::string& name);

// `cluster` without device `device`: its machine's device list, the per-device link overrides
// that name it and, when it was its machine's last device, the machine (and the machine-pair
// overrides naming it) removed; device types stay (a type may then have no device). Throws
// plait::Error when it is the cluster's last device.
ClusterSpec without_device(const ClusterSpec& cluster, int device);

}  // namespace plait::plan
