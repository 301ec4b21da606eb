#include "plait/data/balanced_order.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "plait/core/error.h"

namespace plait::data {

double sequence_attention_work(const SequenceDocuments& documents, int seq) {
  double work = 0;
  for (std::size_t j = 0; j < documents.starts.size(); ++j) {
    const double end = j + 1 < documents.starts.size() ? documents.starts[j + 1] : documents.tokens;
    const double length = end - documents.starts[j];
    work += length * length;
  }
  const double padding = seq - documents.tokens;
  return work + padding * padding;
}

std::vector<std::vector<std::int64_t>> greedy_bins(std::span<const std::int64_t> items, std::span<const double> work,
                                                   std::int64_t bins, std::int64_t capacity) {
  // Heaviest first; equal work in the items' order (stable), so the result never depends on the
  // sort's tie-breaking.
  std::vector<std::int64_t> by_work(items.begin(), items.end());
  std::stable_sort(by_work.begin(), by_work.end(), [&](std::int64_t a, std::int64_t b) { return work[a] > work[b]; });
  std::vector<double> load(static_cast<std::size_t>(bins), 0.0);
  std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(bins));
  for (std::int64_t j : by_work) {
    std::int64_t best = -1;
    for (std::int64_t b = 0; b < bins; ++b) {
      if (static_cast<std::int64_t>(members[b].size()) < capacity && (best < 0 || load[b] < load[best])) best = b;
    }
    load[best] += work[j];
    members[best].push_back(j);
  }
  for (std::vector<std::int64_t>& m : members) std::sort(m.begin(), m.end());
  return members;
}

std::vector<std::int64_t> balanced_window_order(std::span<const double> work, int rows, int microbatches) {
  const auto n = static_cast<std::int64_t>(work.size());
  const std::int64_t per_step = std::int64_t{rows} * microbatches;
  if (rows < 1 || microbatches < 1 || n % per_step != 0) {
    throw Error("balanced order: a window of " + std::to_string(n) + " samples is not whole steps of " +
                std::to_string(microbatches) + " micro-batches of " + std::to_string(rows) + " rows");
  }
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(n));
  for (const std::vector<std::int64_t>& step : greedy_bins(all, work, n / per_step, per_step)) {
    for (const std::vector<std::int64_t>& mb : greedy_bins(step, work, microbatches, rows)) {
      order.insert(order.end(), mb.begin(), mb.end());
    }
  }
  return order;
}

double max_over_mean(std::span<const double> work, int rows) {
  const std::size_t bins = work.size() / static_cast<std::size_t>(rows);
  if (bins == 0) return 1.0;
  double most = 0, total = 0;
  for (std::size_t b = 0; b < bins; ++b) {
    const double sum = std::accumulate(work.begin() + b * rows, work.begin() + (b + 1) * rows, 0.0);
    most = std::max(most, sum);
    total += sum;
  }
  return total > 0 ? most / (total / static_cast<double>(bins)) : 1.0;
}

}  // namespace plait::data
