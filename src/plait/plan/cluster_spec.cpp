#include "plait/plan/cluster_spec.h"

#include <filesystem>
#include <map>

#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/sim/zorse_profiles.h"

namespace plait::plan {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// {"gbit_per_s" | "gbyte_per_s", "latency_us"} plus the fields the caller reads itself.
sim::LinkProfile parse_link(const JsonFields& f) {
  sim::LinkProfile link;
  const bool bits = f.has("gbit_per_s"), bytes = f.has("gbyte_per_s");
  if (bits == bytes) {
    f.fail(bits ? "gbyte_per_s" : "gbit_per_s",
           bits ? "give one of gbit_per_s and gbyte_per_s, not both"
                : "missing; expected the link's bandwidth as gbit_per_s or gbyte_per_s");
  }
  const std::string key = bits ? "gbit_per_s" : "gbyte_per_s";
  const double value = f.number(key);
  if (!(value > 0)) f.fail(key, "expected a positive bandwidth, found " + std::to_string(value));
  link.bandwidth_bytes_per_second = bits ? value * 1e9 / 8 : value * 1e9;
  const double latency = f.number("latency_us");
  if (!(latency >= 0)) f.fail("latency_us", "expected a latency >= 0 microseconds");
  link.latency_seconds = latency * 1e-6;
  return link;
}

DeviceType parse_type(const JsonFields& f, const std::string& name, const std::string& file) {
  DeviceType t;
  t.name = name;
  const bool has_profile = f.has("profile"), has_tflops = f.has("tflops");
  if (has_profile == has_tflops) {
    f.fail(has_profile ? "tflops" : "profile",
           has_profile ? "give one of profile and tflops, not both"
                       : "missing; expected a speed: \"profile\" (zorse:<gpu> or a latency file) or "
                         "\"tflops\" (sustained TFLOP/s)");
  }
  std::string zorse_gpu;
  if (has_profile) {
    t.profile = f.string("profile");
    if (t.profile.starts_with("zorse:")) {
      zorse_gpu = t.profile.substr(6);
      const auto gpus = sim::zorse_gpu_types();
      if (std::find(gpus.begin(), gpus.end(), zorse_gpu) == gpus.end()) {
        f.fail("profile", "no Zorse measurements for '" + zorse_gpu + "'; expected zorse:<gpu> with gpu one of " +
                              sim::zorse_gpu_list());
      }
    } else {
      std::filesystem::path p(t.profile);
      if (p.is_relative()) p = std::filesystem::path(file).parent_path() / p;
      if (!std::filesystem::is_regular_file(p)) {
        f.fail("profile", "'" + t.profile + "' is neither zorse:<gpu> nor an existing latency file (looked for " +
                              p.string() + ")");
      }
      t.profile = p.string();
    }
    t.profile_device = f.string("profile_device", name);
  } else {
    t.tflops = f.number("tflops");
    if (!(t.tflops > 0)) f.fail("tflops", "expected a positive number of TFLOP/s");
  }
  if (f.has("memory_gib")) {
    t.memory_bytes = f.number("memory_gib") * kGiB;
    if (!(t.memory_bytes > 0)) f.fail("memory_gib", "expected a positive memory size in GiB");
  } else if (!zorse_gpu.empty() && sim::zorse_memory_bytes(zorse_gpu) > 0) {
    t.memory_bytes = sim::zorse_memory_bytes(zorse_gpu);
  } else {
    f.fail("memory_gib", "missing; expected the device's memory in GiB");
  }
  t.slowdown = f.number("slowdown", 1.0);
  if (!(t.slowdown >= 1.0)) f.fail("slowdown", "expected a slow-down factor >= 1");
  t.action_overhead_seconds = f.number("action_overhead_us", 0.0) * 1e-6;
  if (!(t.action_overhead_seconds >= 0)) f.fail("action_overhead_us", "expected microseconds >= 0");
  if (f.has("host_memory_gib")) {
    t.host_memory_bytes = f.number("host_memory_gib") * kGiB;
    if (!(t.host_memory_bytes > 0)) f.fail("host_memory_gib", "expected a positive host memory size in GiB");
  }
  t.host_bytes_per_second = f.number("host_gbyte_per_s", 16.0) * 1e9;
  if (!(t.host_bytes_per_second > 0)) f.fail("host_gbyte_per_s", "expected a positive bandwidth in GB/s");
  f.check_no_unknown_fields();
  return t;
}

}  // namespace

const char* precision_name(Precision precision) {
  return precision == Precision::bf16 ? "mixed16" : "fp32";
}

std::string ClusterSpec::device_name(int device) const {
  const ClusterDevice& d = devices[device];
  return machines[d.machine].name + ":" + std::to_string(d.local);
}

const sim::LinkProfile& ClusterSpec::link(int a, int b) const {
  const int ma = devices[a].machine, mb = devices[b].machine;
  const PairLink* machine_override = nullptr;
  for (const PairLink& o : overrides) {
    if (!o.machines && ((o.a == a && o.b == b) || (o.a == b && o.b == a))) return o.link;
    if (o.machines && ((o.a == ma && o.b == mb) || (o.a == mb && o.b == ma))) machine_override = &o;
  }
  if (machine_override) return machine_override->link;
  return ma == mb ? machines[ma].link : network;
}

ClusterSpec parse_cluster_spec(const nlohmann::json& document, const std::string& file) {
  const JsonFields top(document, file);
  ClusterSpec c;
  c.path = file;
  c.name = top.string("name", std::filesystem::path(file).stem().string());
  const std::string precision = top.string("precision", "mixed16");
  if (precision == "mixed16" || precision == "bf16") {
    c.precision = Precision::bf16;
  } else if (precision == "fp32") {
    c.precision = Precision::fp32;
  } else {
    top.fail("precision", "expected \"mixed16\" (or \"bf16\") or \"fp32\", found \"" + precision + "\"");
  }
  const std::string grad_reduce = top.string("grad_reduce", "fp32");
  if (grad_reduce == "bf16") {
    if (c.precision != Precision::bf16) top.fail("grad_reduce", "\"bf16\" needs precision \"mixed16\" (found \"fp32\")");
    c.grad_reduce = spec::GradReduce::bf16;
  } else if (grad_reduce != "fp32") {
    top.fail("grad_reduce", "expected \"fp32\" or \"bf16\", found \"" + grad_reduce + "\"");
  }
  c.emulated = top.boolean("emulated", false);
  c.profile_model = top.string("profile_model", "");

  const JsonFields types = top.object("device_types");
  std::map<std::string, int> type_index;
  for (const auto& [name, value] : top.raw("device_types").items()) {
    const JsonFields f = types.object(name);
    type_index[name] = static_cast<int>(c.types.size());
    c.types.push_back(parse_type(f, name, file));
  }
  if (c.types.empty()) top.fail("device_types", "expected at least one device type");

  const bool has_default_link = top.has("machine_link");
  sim::LinkProfile default_link;
  if (has_default_link) {
    const JsonFields f = top.object("machine_link");
    default_link = parse_link(f);
    f.check_no_unknown_fields();
  }
  const nlohmann::json& machines = top.raw("machines");
  if (!machines.is_array() || machines.empty()) {
    top.fail("machines", "expected a non-empty array of machines");
  }
  std::map<std::string, int> machine_index;
  for (std::size_t i = 0; i < machines.size(); ++i) {
    const JsonFields m(machines[i], file, "machines[" + std::to_string(i) + "]");
    Machine machine;
    machine.name = m.string("name");
    if (machine.name.empty() || machine.name.find(':') != std::string::npos) {
      m.fail("name", "expected a non-empty name without ':'");
    }
    if (machine_index.count(machine.name)) m.fail("name", "machine '" + machine.name + "' is listed twice");
    machine_index[machine.name] = static_cast<int>(i);
    const nlohmann::json& devices = m.raw("devices");
    if (!devices.is_array() || devices.empty()) m.fail("devices", "expected a non-empty array of {type, count}");
    for (std::size_t j = 0; j < devices.size(); ++j) {
      const JsonFields d(devices[j], file, m.field_path("devices") + "[" + std::to_string(j) + "]");
      const std::string type = d.string("type");
      auto it = type_index.find(type);
      if (it == type_index.end()) {
        std::string names;
        for (const auto& [n, unused] : type_index) names += (names.empty() ? "" : ", ") + n;
        d.fail("type", "unknown device type '" + type + "'; device_types has " + names);
      }
      const int count = static_cast<int>(d.integer_in("count", 1, 1 << 16, 1));
      d.check_no_unknown_fields();
      for (int n = 0; n < count; ++n) {
        machine.devices.push_back(c.num_devices());
        c.devices.push_back({static_cast<int>(i), static_cast<int>(machine.devices.size()) - 1, it->second});
      }
    }
    if (m.has("link")) {
      const JsonFields l = m.object("link");
      machine.link = parse_link(l);
      l.check_no_unknown_fields();
    } else if (has_default_link) {
      machine.link = default_link;
    } else if (machine.devices.size() > 1) {
      m.fail("link", "missing; a machine with several devices needs its link (or give a top-level machine_link)");
    }
    m.check_no_unknown_fields();
    c.machines.push_back(std::move(machine));
  }
  if (top.has("network")) {
    const JsonFields n = top.object("network");
    c.network = parse_link(n);
    n.check_no_unknown_fields();
  } else if (c.machines.size() > 1) {
    top.fail("network", "missing; a cluster of several machines needs the link between them");
  }

  if (top.has("links")) {
    const nlohmann::json& links = top.raw("links");
    if (!links.is_array()) top.fail("links", "expected an array of {between, bandwidth, latency_us}");
    for (std::size_t i = 0; i < links.size(); ++i) {
      const JsonFields l(links[i], file, "links[" + std::to_string(i) + "]");
      const std::vector<std::string> between = l.strings("between");
      if (between.size() != 2) l.fail("between", "expected two machines or two devices (\"machine:index\")");
      ClusterSpec::PairLink o{};
      int ends[2];
      bool device_ends[2];
      for (int e = 0; e < 2; ++e) {
        const std::string& name = between[e];
        const std::size_t colon = name.find(':');
        device_ends[e] = colon != std::string::npos;
        auto it = machine_index.find(name.substr(0, colon));
        if (it == machine_index.end()) l.fail("between", "unknown machine in '" + name + "'");
        if (!device_ends[e]) {
          ends[e] = it->second;
          continue;
        }
        const std::string index = name.substr(colon + 1);
        const auto& devs = c.machines[it->second].devices;
        std::size_t local = 0;
        try {
          local = std::stoul(index);
        } catch (const std::exception&) {
          l.fail("between", "expected a device index after ':' in '" + name + "'");
        }
        if (local >= devs.size()) {
          l.fail("between", "machine " + c.machines[it->second].name + " has " + std::to_string(devs.size()) +
                                " devices; '" + name + "' is not one of them");
        }
        ends[e] = devs[local];
      }
      if (device_ends[0] != device_ends[1]) l.fail("between", "expected two machines or two devices, not one of each");
      if (ends[0] == ends[1]) l.fail("between", "a link needs two different ends");
      o.a = ends[0];
      o.b = ends[1];
      o.machines = !device_ends[0];
      o.link = parse_link(l);
      l.check_no_unknown_fields();
      c.overrides.push_back(o);
    }
  }
  top.check_no_unknown_fields();
  return c;
}

ClusterSpec read_cluster_spec(const std::string& path) {
  return parse_cluster_spec(read_json_file(path), path);
}

}  // namespace plait::plan
