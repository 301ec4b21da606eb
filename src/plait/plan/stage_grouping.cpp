#include "plait/plan/stage_grouping.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace plait::plan {

namespace {

int find_root(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

double min_memory(const ClusterSpec& cluster, const std::vector<int>& group) {
  double m = std::numeric_limits<double>::infinity();
  for (int d : group) m = std::min(m, cluster.type_of(d).memory_bytes);
  return m;
}

// The fastest link between two groups.
double bandwidth_between(const ClusterSpec& cluster, const std::vector<int>& a, const std::vector<int>& b) {
  double best = 0;
  for (int x : a) {
    for (int y : b) best = std::max(best, cluster.link(x, y).bandwidth_bytes_per_second);
  }
  return best;
}

// Splits `units` (lists of devices) until there are at least `parts`, halving the largest.
std::vector<std::vector<int>> split_to(std::vector<std::vector<int>> units, std::size_t parts) {
  while (units.size() < parts) {
    auto largest = std::max_element(units.begin(), units.end(),
                                    [](const auto& a, const auto& b) { return a.size() < b.size(); });
    if (largest->size() < 2) break;
    std::vector<int> second(largest->begin() + static_cast<long>(largest->size() / 2), largest->end());
    largest->resize(largest->size() / 2);
    units.push_back(std::move(second));
  }
  return units;
}

// Longest processing time first: units sorted by weight descending, each to the lightest group.
Grouping balance(std::vector<std::vector<int>> units, int parts, const std::function<double(const std::vector<int>&)>& weight) {
  std::stable_sort(units.begin(), units.end(), [&](const auto& a, const auto& b) { return weight(a) > weight(b); });
  Grouping groups(parts);
  std::vector<double> load(parts, 0.0);
  for (auto& u : units) {
    const int g = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[g] += weight(u);
    groups[g].insert(groups[g].end(), u.begin(), u.end());
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.empty(); }), groups.end());
  return groups;
}

}  // namespace

std::vector<std::vector<int>> bandwidth_islands(const ClusterSpec& cluster, const std::vector<int>& devices) {
  const std::size_t n = devices.size();
  if (n <= 1) return n ? std::vector<std::vector<int>>{devices} : std::vector<std::vector<int>>{};
  double slowest = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      slowest = std::min(slowest, cluster.link(devices[i], devices[j]).bandwidth_bytes_per_second);
    }
  }
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      if (cluster.link(devices[i], devices[j]).bandwidth_bytes_per_second > slowest) {
        parent[find_root(parent, static_cast<int>(i))] = find_root(parent, static_cast<int>(j));
      }
    }
  }
  std::map<int, std::vector<int>> components;
  for (std::size_t i = 0; i < n; ++i) components[find_root(parent, static_cast<int>(i))].push_back(devices[i]);
  std::vector<std::vector<int>> islands;
  for (auto& [root, members] : components) islands.push_back(std::move(members));
  // Uniform links: no structure to keep, every device is its own island.
  if (islands.size() == 1) {
    islands.clear();
    for (int d : devices) islands.push_back({d});
  }
  std::sort(islands.begin(), islands.end());
  return islands;
}

Grouping order_groups(const ClusterSpec& cluster, Grouping groups) {
  Grouping out;
  std::vector<bool> used(groups.size(), false);
  for (std::size_t step = 0; step < groups.size(); ++step) {
    int best = -1;
    double best_memory = 0, best_bw = 0;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (used[i]) continue;
      // Memory in whole GiB, so that equal devices tie and bandwidth decides.
      const double mem = std::floor(min_memory(cluster, groups[i]) / (1024.0 * 1024 * 1024));
      const double bw = out.empty() ? 0 : bandwidth_between(cluster, out.back(), groups[i]);
      if (best < 0 || mem > best_memory || (mem == best_memory && bw > best_bw)) {
        best = static_cast<int>(i);
        best_memory = mem;
        best_bw = bw;
      }
    }
    used[best] = true;
    out.push_back(groups[best]);
  }
  return out;
}

std::vector<Grouping> stage_groupings(const ClusterSpec& cluster, const std::vector<int>& devices,
                                      const std::vector<double>& speed, int max_groups) {
  const std::vector<std::vector<int>> islands = bandwidth_islands(cluster, devices);
  std::set<Grouping> seen;
  std::vector<Grouping> out;
  auto add = [&](Grouping g) {
    if (g.empty() || static_cast<int>(g.size()) > max_groups) return;
    g = order_groups(cluster, std::move(g));
    Grouping reversed(g.rbegin(), g.rend());
    for (Grouping* x : {&g, &reversed}) {
      if (seen.insert(*x).second) out.push_back(*x);
    }
  };
  auto speed_of = [&](const std::vector<int>& unit) {
    double s = 0;
    for (int d : unit) s += speed[d];
    return s;
  };
  auto size_of = [](const std::vector<int>& unit) { return static_cast<double>(unit.size()); };

  // Type-pure: islands of one type (islands mixing types join the mixed candidates only).
  std::map<int, std::vector<std::vector<int>>> by_type;
  for (const auto& island : islands) {
    const int t = cluster.devices[island[0]].type;
    const bool pure = std::all_of(island.begin(), island.end(), [&](int d) { return cluster.devices[d].type == t; });
    if (pure) by_type[t].push_back(island);
  }
  std::vector<std::vector<Grouping>> options;  // per type: its possible splits (first: unused)
  for (const auto& [type, type_islands] : by_type) {
    std::size_t count = 0;
    for (const auto& i : type_islands) count += i.size();
    std::vector<Grouping> splits = {{}};
    for (std::size_t parts : {1u, 2u, 3u, 4u, 6u, 8u, 12u, 16u, 24u, 32u}) {
      if (parts > count || static_cast<int>(parts) > max_groups) break;
      Grouping g = balance(split_to(type_islands, parts), static_cast<int>(parts), size_of);
      if (g.size() == parts) splits.push_back(std::move(g));
    }
    options.push_back(std::move(splits));
  }
  std::vector<std::size_t> pick(options.size(), 0);
  while (true) {
    Grouping g;
    for (std::size_t t = 0; t < options.size(); ++t) {
      const Grouping& part = options[t][pick[t]];
      g.insert(g.end(), part.begin(), part.end());
    }
    add(std::move(g));
    std::size_t t = 0;
    while (t < options.size() && ++pick[t] == options[t].size()) pick[t++] = 0;
    if (t == options.size()) break;
  }

  // Mixed: every island (split if needed) spread over P stages by speed.
  for (int parts : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32}) {
    if (parts > max_groups || parts > static_cast<int>(devices.size())) break;
    add(balance(split_to(islands, static_cast<std::size_t>(parts)), parts, speed_of));
  }

  // Small clusters: every ordered partition of the islands.
  if (islands.size() <= 5) {
    const int n = static_cast<int>(islands.size());
    std::vector<int> label(n, 0);
    // Restricted growth strings enumerate set partitions; each is then taken in every order.
    std::function<void(int, int)> rec = [&](int i, int blocks) {
      if (i == n) {
        Grouping g(blocks);
        for (int j = 0; j < n; ++j) g[label[j]].insert(g[label[j]].end(), islands[j].begin(), islands[j].end());
        for (auto& x : g) std::sort(x.begin(), x.end());
        std::sort(g.begin(), g.end());
        if (static_cast<int>(g.size()) > max_groups) return;
        do {
          if (seen.insert(g).second) out.push_back(g);
        } while (std::next_permutation(g.begin(), g.end()));
        return;
      }
      for (int b = 0; b <= blocks; ++b) {
        label[i] = b;
        rec(i + 1, std::max(blocks, b + 1));
      }
    };
    rec(0, 0);
  }
  return out;
}

}  // namespace plait::plan
