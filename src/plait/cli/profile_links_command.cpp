// `mpirun -np N plait profile links`: every pair of ranks' link and every group's all-reduce and
// reduce-scatter, measured (runtime/link_profiler.h) and written in the cluster spec's link form
// (plan/measured_links.h), so a real cluster's spec is measured rather than typed (docs/runtime.md,
// "Link profiles").
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "plait/cli/byte_size.h"
#include "plait/cli/commands.h"
#include "plait/cli/flag_values.h"
#include "plait/comm/abort_job.h"
#include "plait/comm/mpi_session.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"
#include "plait/plan/cluster_spec.h"
#include "plait/plan/gradient_sync.h"
#include "plait/plan/measured_links.h"
#include "plait/runtime/link_profiler.h"

namespace plait::cli {
namespace {

struct LinksArgs {
  std::string out = "links.json";
  std::string collectives_out;
  std::string sizes = "4,64KiB,1MiB,4MiB";
  std::string groups;  // "0,1;2,3"
  std::string device_type = "host";
  int trips = 20;
};

// "0,1;2,3": groups of world ranks (checked against the job by the profiler).
std::vector<std::vector<int>> parse_groups(const std::string& text) {
  std::vector<std::vector<int>> groups;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(';', at), text.size());
    std::vector<int> g;
    for (const std::string& item : comma_list(text.substr(at, end - at))) {
      int rank = -1;
      const auto r = std::from_chars(item.data(), item.data() + item.size(), rank);
      if (r.ec != std::errc() || r.ptr != item.data() + item.size() || rank < 0) {
        throw Error("--groups: expected ranks >= 0 separated by commas, groups by ';', found '" + text + "'");
      }
      g.push_back(rank);
    }
    groups.push_back(std::move(g));
    at = end + 1;
  }
  return groups;
}

// The collectives' measurements as JSON (beside the links file).
nlohmann::json collectives_json(const runtime::LinkMeasurements& m, const std::vector<std::string>& devices) {
  nlohmann::json groups = nlohmann::json::array();
  for (const runtime::MeasuredCollective& c : m.collectives) {
    nlohmann::json names = nlohmann::json::array();
    for (int r : c.ranks) names.push_back(devices[static_cast<std::size_t>(r)]);
    auto op = [](const std::vector<double>& seconds, const sim::LinkProfile& line) {
      nlohmann::json j = plan::link_json(line);
      nlohmann::json us = nlohmann::json::array();
      for (double s : seconds) us.push_back(s * 1e6);
      j["measured_us"] = us;
      return j;
    };
    groups.push_back({{"what", c.what},
                      {"ranks", c.ranks},
                      {"devices", names},
                      {"allreduce", op(c.allreduce_seconds, c.allreduce)},
                      {"reduce_scatter", op(c.reduce_scatter_seconds, c.reduce_scatter)}});
  }
  return {{"sizes_bytes", m.sizes}, {"groups", groups}};
}

void run_links(const LinksArgs& a) {
  comm::MpiSession session;
  try {
    runtime::LinkProbeOptions o;
    o.sizes.clear();
    for (const std::string& s : comma_list(a.sizes)) o.sizes.push_back(parse_byte_size("--sizes", s));
    o.trips = a.trips;
    o.groups = parse_groups(a.groups);
    const runtime::LinkMeasurements m = runtime::measure_links(session.world(), session.hostname(), o);
    if (session.rank() != 0) return;

    const std::vector<std::string> devices = plan::measured_device_names(m.hosts);
    std::vector<plan::MeasuredLink> links;
    for (const runtime::MeasuredPair& p : m.pairs) links.push_back({p.a, p.b, p.link});
    const nlohmann::json doc = plan::measured_links_json(m.hosts, links, a.device_type);
    // The form is the cluster reader's: read it back as a cluster (with a placeholder speed for
    // the device type), which also gives the planner's ring model of the collectives.
    nlohmann::json cluster = doc;
    cluster["name"] = "measured";
    cluster["device_types"] = {{a.device_type, {{"tflops", 1.0}, {"memory_gib", 1.0}}}};
    const plan::ClusterSpec spec = plan::parse_cluster_spec(cluster, a.out);

    std::printf("plait profile links: %zu ranks on %zu host(s); one pair at a time, message sizes",
                m.hosts.size(), spec.machines.size());
    for (std::size_t s : m.sizes) std::printf(" %zu", s);
    std::printf(" bytes, median of %d round trips / 2 after a warm-up\n", a.trips);
    std::printf("%-24s %-24s | %12s %12s | one-way us per size\n", "rank a (device)", "rank b (device)",
                "latency us", "GB/s");
    for (const runtime::MeasuredPair& p : m.pairs) {
      const std::string left = std::to_string(p.a) + " (" + devices[p.a] + ")";
      const std::string right = std::to_string(p.b) + " (" + devices[p.b] + ")";
      std::printf("%-24s %-24s | %12.2f %12.3f |", left.c_str(), right.c_str(), p.link.latency_seconds * 1e6,
                  p.link.bandwidth_bytes_per_second / 1e9);
      for (double t : p.one_way_seconds) std::printf(" %.1f", t * 1e6);
      std::printf("\n");
    }
    std::printf("collectives (the slowest member, median over trips; ring = the planner's model from the "
                "measured links, plan/gradient_sync.h):\n");
    std::printf("%-20s %-16s | %-14s |", "group", "ranks", "op");
    for (std::size_t s : m.sizes) std::printf(" %10zu B", s);
    std::printf("\n");
    for (const runtime::MeasuredCollective& c : m.collectives) {
      std::string ranks;
      for (int r : c.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      std::vector<int> group_devices(c.ranks.begin(), c.ranks.end());
      const auto row = [&](const char* op, const std::vector<double>& seconds) {
        std::printf("%-20s %-16s | %-14s |", c.what.c_str(), ranks.c_str(), op);
        for (double t : seconds) std::printf(" %9.1f us", t * 1e6);
        std::printf("\n");
      };
      row("all-reduce", c.allreduce_seconds);
      std::vector<double> ring;
      for (std::size_t s : m.sizes) {
        // An all-reduce of S bytes is a reduce-scatter and an all-gather of S each: the model's 2S.
        ring.push_back(plan::ring_sync_seconds(spec, group_devices, 2.0 * static_cast<double>(s)));
      }
      row("  ring model", ring);
      row("reduce-scatter", c.reduce_scatter_seconds);
    }
    write_json_file(a.out, doc, 2);
    std::printf("wrote %s (the cluster spec's link form: machines, links%s; add device_types)\n", a.out.c_str(),
                doc.contains("network") ? ", network" : "");
    std::string collectives_out = a.collectives_out;
    if (collectives_out.empty()) {
      const std::filesystem::path p(a.out);
      collectives_out = (p.parent_path() / (p.stem().string() + ".collectives.json")).string();
    }
    write_json_file(collectives_out, collectives_json(m, devices), 2);
    std::printf("wrote %s (all-reduce and reduce-scatter per group and size)\n", collectives_out.c_str());
  } catch (const std::exception& e) {
    comm::abort_job(e.what());
  }
}

void register_profile_links(CLI::App& app) {
  CLI::App* profile = nullptr;
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == "profile") profile = sub;
  }
  if (profile == nullptr) throw Error("plait profile links: the profile command is not registered");
  auto a = std::make_shared<LinksArgs>();
  auto* cmd = profile->add_subcommand(
      "links",
      "Measure latency and bandwidth between every pair of ranks and the all-reduce and\n"
      "reduce-scatter of each group, and write them in the cluster spec's link form\n"
      "(`mpirun -np N plait profile links --out links.json`; docs/runtime.md)");
  cmd->add_option("--out", a->out, "Links file to write (machines, links, network)")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_option("--collectives-out", a->collectives_out,
                  "Collectives file (default: <out stem>.collectives.json)")
      ->type_name("FILE");
  cmd->add_option("--sizes", a->sizes, "Message sizes, ascending (bytes, or 64KiB, 4MiB)")->capture_default_str();
  cmd->add_option("--trips", a->trips, "Round trips (and collective runs) per size; the median is kept")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--groups", a->groups,
                  "More groups whose collectives to time, world ranks: \"0,1;2,3\" (the job and each\n"
                  "host's ranks are always timed)");
  cmd->add_option("--device-type", a->device_type, "Device type the machines' devices get")->capture_default_str();
  cmd->callback([a] { run_links(*a); });
}

const CommandRegistration kRegistration(26, register_profile_links);

}  // namespace
}  // namespace plait::cli
