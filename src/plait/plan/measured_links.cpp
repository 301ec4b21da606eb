#include "plait/plan/measured_links.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace plait::plan {
namespace {

// The median link of a set: median latency and median bandwidth, each on its own.
sim::LinkProfile median_link(std::vector<sim::LinkProfile> links) {
  const auto middle = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  std::vector<double> latency, bandwidth;
  for (const sim::LinkProfile& l : links) {
    latency.push_back(l.latency_seconds);
    bandwidth.push_back(l.bandwidth_bytes_per_second);
  }
  sim::LinkProfile m;
  m.latency_seconds = middle(latency);
  m.bandwidth_bytes_per_second = middle(bandwidth);
  return m;
}

// Four significant digits: the figures are measurements, not constants.
double rounded(double x) {
  if (x <= 0) return x;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(x)));
  return std::round(x * scale) / scale;
}

}  // namespace

nlohmann::json link_json(const sim::LinkProfile& link) {
  return {{"gbyte_per_s", rounded(link.bandwidth_bytes_per_second / 1e9)},
          {"latency_us", rounded(link.latency_seconds * 1e6)}};
}

std::vector<std::string> measured_device_names(const std::vector<std::string>& rank_hosts) {
  std::map<std::string, int> next;
  std::vector<std::string> names;
  for (const std::string& host : rank_hosts) names.push_back(host + ":" + std::to_string(next[host]++));
  return names;
}

nlohmann::json measured_links_json(const std::vector<std::string>& rank_hosts,
                                   const std::vector<MeasuredLink>& pairs, const std::string& device_type) {
  std::vector<std::string> hosts;  // in the order of their first rank
  std::map<std::string, int> ranks_on;
  for (const std::string& h : rank_hosts) {
    if (ranks_on[h]++ == 0) hosts.push_back(h);
  }
  std::map<std::string, std::vector<sim::LinkProfile>> inside;
  std::vector<sim::LinkProfile> between;
  for (const MeasuredLink& p : pairs) {
    const std::string &ha = rank_hosts[static_cast<std::size_t>(p.a)], &hb = rank_hosts[static_cast<std::size_t>(p.b)];
    if (ha == hb) {
      inside[ha].push_back(p.link);
    } else {
      between.push_back(p.link);
    }
  }
  nlohmann::json machines = nlohmann::json::array();
  for (const std::string& h : hosts) {
    nlohmann::json m = {{"name", h}, {"devices", {{{"type", device_type}, {"count", ranks_on[h]}}}}};
    if (!inside[h].empty()) m["link"] = link_json(median_link(inside[h]));
    machines.push_back(std::move(m));
  }
  const std::vector<std::string> names = measured_device_names(rank_hosts);
  nlohmann::json links = nlohmann::json::array();
  for (const MeasuredLink& p : pairs) {
    nlohmann::json l = link_json(p.link);
    l["between"] = {names[static_cast<std::size_t>(p.a)], names[static_cast<std::size_t>(p.b)]};
    links.push_back(std::move(l));
  }
  nlohmann::json doc = {{"machines", std::move(machines)}, {"links", std::move(links)}};
  if (!between.empty()) doc["network"] = link_json(median_link(between));
  return doc;
}

}  // namespace plait::plan
