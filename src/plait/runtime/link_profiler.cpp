#include "plait/runtime/link_profiler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "plait/core/error.h"
#include "plait/core/median.h"
#include "plait/core/monotonic_clock.h"

namespace plait::runtime {
namespace {

constexpr int kPingTag = 901, kPongTag = 902;
constexpr std::size_t kMaxHost = 255;

std::size_t floats_of(std::size_t bytes) { return std::max<std::size_t>(1, bytes / sizeof(float)); }

// Every rank's host name (as doubles, one per character: the job's one collective for small
// reports, a sum of slots).
std::vector<std::string> gather_hosts(comm::Communicator& world, const std::string& host) {
  const int n = world.size();
  std::vector<double> slots(static_cast<std::size_t>(n) * (kMaxHost + 1), 0.0);
  const std::string mine = host.substr(0, kMaxHost);
  double* at = slots.data() + static_cast<std::size_t>(world.rank()) * (kMaxHost + 1);
  for (std::size_t i = 0; i < mine.size(); ++i) at[i] = static_cast<unsigned char>(mine[i]);
  world.allreduce(std::span<double>(slots), comm::ReduceOp::kSum);
  std::vector<std::string> hosts(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    const double* s = slots.data() + static_cast<std::size_t>(r) * (kMaxHost + 1);
    for (std::size_t i = 0; i < kMaxHost && s[i] != 0; ++i) hosts[r] += static_cast<char>(s[i]);
  }
  return hosts;
}

// The one-way seconds of each size between a and b (on rank a; others return zeros).
std::vector<double> ping_pong(comm::Communicator& world, int a, int b, const LinkProbeOptions& o,
                              std::vector<float>& buffer) {
  std::vector<double> out(o.sizes.size(), 0.0);
  const int me = world.rank();
  if (me != a && me != b) return out;
  const int peer = me == a ? b : a;
  for (std::size_t s = 0; s < o.sizes.size(); ++s) {
    const std::span<float> message(buffer.data(), floats_of(o.sizes[s]));
    std::vector<double> trips;
    for (int t = 0; t <= o.trips; ++t) {
      const double t0 = monotonic_seconds();
      if (me == a) {
        world.isend(std::span<const float>(message), peer, kPingTag).wait();
        world.irecv(message, peer, kPongTag).wait();
      } else {
        world.irecv(message, peer, kPingTag).wait();
        world.isend(std::span<const float>(message), peer, kPongTag).wait();
      }
      if (t > 0) trips.push_back((monotonic_seconds() - t0) / 2);  // trip 0 warms up
    }
    if (me == a) out[s] = median(trips);
  }
  return out;
}

// The slowest member's seconds of `op` per trip, median over trips (on every member).
template <typename Op>
double time_collective(comm::Communicator& group, int trips, const Op& op) {
  std::vector<double> slowest;
  for (int t = 0; t <= trips; ++t) {
    group.barrier();
    const double t0 = monotonic_seconds();
    op();
    const double seconds = group.allreduce(monotonic_seconds() - t0, comm::ReduceOp::kMax);
    if (t > 0) slowest.push_back(seconds);
  }
  return median(slowest);
}

}  // namespace

sim::LinkProfile alpha_beta(const std::vector<std::size_t>& bytes, const std::vector<double>& seconds) {
  const double n = static_cast<double>(bytes.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double x = static_cast<double>(bytes[i]);
    sx += x;
    sy += seconds[i];
    sxx += x * x;
    sxy += x * seconds[i];
  }
  const double slope = bytes.size() > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0.0;
  sim::LinkProfile link;
  link.latency_seconds = seconds.front();
  // Times that do not grow with the bytes are noise (a descheduled trip on shared cores, sizes
  // too small to see the wire): then the largest message's bytes over its whole time, which
  // counts its latency as transfer and so errs low.
  link.bandwidth_bytes_per_second =
      slope > 0 ? 1.0 / slope : static_cast<double>(bytes.back()) / std::max(seconds.back(), 1e-12);
  return link;
}

LinkMeasurements measure_links(comm::Communicator& world, const std::string& host,
                               const LinkProbeOptions& o) {
  if (o.sizes.size() < 2 || o.sizes.front() < sizeof(float) ||
      !std::is_sorted(o.sizes.begin(), o.sizes.end()) ||
      std::adjacent_find(o.sizes.begin(), o.sizes.end()) != o.sizes.end()) {
    throw Error("link profile: expected at least two message sizes, ascending, of 4 bytes or more");
  }
  if (o.trips < 1) throw Error("link profile: expected at least one trip per size");
  const int n = world.size();
  LinkMeasurements m;
  m.sizes = o.sizes;
  m.hosts = gather_hosts(world, host);
  std::vector<float> buffer(floats_of(o.sizes.back()), 1.0f);

  // Pairs, one at a time.
  const std::size_t k = o.sizes.size();
  std::vector<double> pair_slots;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      world.barrier();
      const std::vector<double> t = ping_pong(world, a, b, o, buffer);
      pair_slots.insert(pair_slots.end(), t.begin(), t.end());
    }
  }
  world.barrier();
  if (!pair_slots.empty()) world.allreduce(std::span<double>(pair_slots), comm::ReduceOp::kSum);
  std::size_t at = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      MeasuredPair p;
      p.a = a;
      p.b = b;
      p.one_way_seconds.assign(pair_slots.begin() + static_cast<std::ptrdiff_t>(at),
                               pair_slots.begin() + static_cast<std::ptrdiff_t>(at + k));
      p.link = alpha_beta(o.sizes, p.one_way_seconds);
      m.pairs.push_back(std::move(p));
      at += k;
    }
  }

  // Groups: the job, each host's ranks (when the job spans hosts), the ones asked for; once each.
  std::vector<std::pair<std::vector<int>, std::string>> groups;
  std::set<std::vector<int>> seen;
  const auto add = [&](std::vector<int> ranks, std::string what) {
    std::sort(ranks.begin(), ranks.end());
    if (ranks.size() < 2 || !seen.insert(ranks).second) return;
    groups.emplace_back(std::move(ranks), std::move(what));
  };
  std::vector<int> everyone(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) everyone[r] = r;
  add(everyone, "job");
  std::map<std::string, std::vector<int>> by_host;
  for (int r = 0; r < n; ++r) by_host[m.hosts[r]].push_back(r);
  if (by_host.size() > 1) {
    for (auto& [name, ranks] : by_host) add(ranks, "host " + name);
  }
  for (const std::vector<int>& g : o.groups) {
    for (int r : g) {
      if (r < 0 || r >= n) {
        throw Error("link profile: group rank " + std::to_string(r) + " is not a rank of the " +
                    std::to_string(n) + "-rank job");
      }
    }
    add(g, "group");
  }
  std::vector<std::vector<int>> lists;
  for (const auto& g : groups) lists.push_back(g.first);
  const std::vector<std::unique_ptr<comm::Communicator>> comms = world.create_groups(lists);
  std::vector<double> collective_slots(groups.size() * k * 2, 0.0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    world.barrier();
    comm::Communicator* c = comms[g].get();
    if (c == nullptr) continue;
    const std::size_t p = static_cast<std::size_t>(c->size());
    for (std::size_t s = 0; s < k; ++s) {
      const std::size_t floats = std::max(p, floats_of(o.sizes[s]) / p * p);
      const std::span<float> data(buffer.data(), floats);
      const std::vector<std::size_t> counts(p, floats / p);
      const double all = time_collective(*c, o.trips, [&] { c->allreduce(data, comm::ReduceOp::kSum); });
      const double scatter = time_collective(
          *c, o.trips, [&] { c->ireduce_scatter(data, counts, comm::ReduceOp::kSum).wait(); });
      if (c->rank() == 0) {
        collective_slots[(g * k + s) * 2] = all;
        collective_slots[(g * k + s) * 2 + 1] = scatter;
      }
      std::fill(data.begin(), data.end(), 1.0f);  // sums grew the values; keep them finite
    }
  }
  world.barrier();
  if (!collective_slots.empty()) world.allreduce(std::span<double>(collective_slots), comm::ReduceOp::kSum);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    MeasuredCollective c;
    c.ranks = groups[g].first;
    c.what = groups[g].second;
    for (std::size_t s = 0; s < k; ++s) {
      c.allreduce_seconds.push_back(collective_slots[(g * k + s) * 2]);
      c.reduce_scatter_seconds.push_back(collective_slots[(g * k + s) * 2 + 1]);
    }
    c.allreduce = alpha_beta(o.sizes, c.allreduce_seconds);
    c.reduce_scatter = alpha_beta(o.sizes, c.reduce_scatter_seconds);
    m.collectives.push_back(std::move(c));
  }
  return m;
}

}  // namespace plait::runtime
