#include "plait/spec/document_partition.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "plait/core/error.h"

namespace plait::spec {

SegmentWorkCoefficients segment_work_coefficients(const ModelSpec& model) {
  // The same terms as segment_forward_flops: the head's and the matmuls' FLOPs are linear in the
  // tokens; layer_attention_flops is (4d + 3) n_h per causal pair (its s e - s^2 / 2).
  SegmentWorkCoefficients c;
  c.per_token = model.vocab_flops(1) + model.layers * model.layer_linear_flops(1);
  c.per_pair = static_cast<double>(model.layers) * (4.0 * model.head_dim() + 3.0) * model.heads;
  return c;
}

std::vector<double> position_work(const ModelSpec& model, std::span<const std::int64_t> pairs, int rows) {
  const SegmentWorkCoefficients c = segment_work_coefficients(model);
  std::vector<double> work(pairs.size());
  for (std::size_t p = 0; p < pairs.size(); ++p) {
    work[p] = rows * c.per_token + c.per_pair * static_cast<double>(pairs[p]);
  }
  return work;
}

SequencePartition work_partition(std::span<const double> work, int rows, int segments, std::int64_t multiple) {
  const auto seq = static_cast<std::int64_t>(work.size());
  const std::int64_t m = std::max<std::int64_t>(multiple, 1);
  if (segments < 1 || rows < 1 || segments * m > seq) {
    throw Error("work partition: cannot cut " + std::to_string(seq) + " tokens into " + std::to_string(segments) +
                " segments of multiples of " + std::to_string(m) + " (rows " + std::to_string(rows) + ")");
  }
  std::vector<double> prefix(static_cast<std::size_t>(seq) + 1, 0.0);  // prefix[e]: work of [0, e)
  for (std::int64_t p = 0; p < seq; ++p) prefix[p + 1] = prefix[p] + work[p];
  const double total = prefix.back();

  SequencePartition out;
  out.split = SplitMethod::flops;
  std::int64_t start = 0;
  for (int i = 0; i < segments; ++i) {
    std::int64_t end = seq;
    if (i + 1 < segments) {
      const double target = total * (i + 1) / segments;
      // The first position whose prefix reaches the target, then the nearer of the two multiples
      // around the crossing (ties to the earlier), inside the room the other segments need.
      const auto crossing = std::lower_bound(prefix.begin(), prefix.end(), target) - prefix.begin();
      const std::int64_t lo = crossing / m * m;
      const std::int64_t hi = std::min<std::int64_t>(lo + m, seq);
      end = std::abs(prefix[lo] - target) <= std::abs(prefix[hi] - target) ? lo : hi;
      const std::int64_t latest = (seq - (segments - 1 - i) * m) / m * m;
      end = std::clamp(end, start + m, latest);
    }
    out.starts.push_back(start);
    out.lengths.push_back(end - start);
    out.flops.push_back((prefix[end] - prefix[start]) / rows);
    start = end;
  }
  return out;
}

SequencePartition document_partition(const ModelSpec& model, std::span<const std::int64_t> pairs, int rows,
                                     int segments, std::int64_t multiple) {
  return work_partition(position_work(model, pairs, rows), rows, segments, multiple);
}

}  // namespace plait::spec
