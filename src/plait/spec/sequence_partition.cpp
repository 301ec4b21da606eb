#include "plait/spec/sequence_partition.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "plait/core/error.h"

namespace plait::spec {

SplitMethod parse_split_method(std::string_view text) {
  if (text == "even") return SplitMethod::even;
  if (text == "flops") return SplitMethod::flops;
  throw Error("unknown split method '" + std::string(text) + "'; expected even or flops");
}

std::string_view split_method_name(SplitMethod method) {
  return method == SplitMethod::even ? "even" : "flops";
}

SegmentRequest read_segment_request(const JsonFields& train, std::int64_t seq) {
  SegmentRequest r;
  if (!train.has("segments") || !train.raw("segments").is_array()) {
    r.count = static_cast<int>(train.integer_in("segments", 1, std::min<std::int64_t>(seq, INT_MAX), 1));
    return r;
  }
  std::int64_t sum = 0;
  for (std::int64_t len : train.integers("segments")) {
    if (len < 1) train.fail("segments", "segment lengths must be >= 1");
    sum += len;
    r.lengths.push_back(len);
  }
  if (r.lengths.empty()) train.fail("segments", "expected at least one segment length");
  if (sum != seq) {
    train.fail("segments", "segment lengths sum to " + std::to_string(sum) + ", expected " +
                               train.field_path("seq") + " " + std::to_string(seq));
  }
  r.count = static_cast<int>(r.lengths.size());
  return r;
}

Segment SequencePartition::segment(int i) const {
  const std::size_t at = static_cast<std::size_t>(i);
  if (starts[at] + lengths[at] > INT_MAX) {
    throw Error("sequence partition: segment " + std::to_string(i) + " ends past the engine's positions");
  }
  return {i, static_cast<int>(starts[at]), static_cast<int>(lengths[at])};
}

double SequencePartition::flops_imbalance() const {
  const auto [lo, hi] = std::minmax_element(flops.begin(), flops.end());
  return *hi / *lo - 1.0;
}

std::vector<std::int64_t> even_lengths(std::int64_t seq, int k) {
  if (k < 1 || k > seq) {
    throw Error("cannot cut a sequence of " + std::to_string(seq) + " tokens into " +
                std::to_string(k) + " segments");
  }
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(k), seq / k);
  lengths[0] += seq % k;
  return lengths;
}

SequencePartition partition_from_lengths(const ModelSpec& model, std::vector<std::int64_t> lengths) {
  if (lengths.empty()) throw Error("sequence partition: expected at least one segment");
  SequencePartition p;
  std::int64_t start = 0;
  for (std::int64_t len : lengths) {
    if (len < 1) throw Error("sequence partition: segment lengths must be >= 1, found " + std::to_string(len));
    p.starts.push_back(start);
    p.flops.push_back(model.segment_forward_flops(start, len));
    start += len;
  }
  p.lengths = std::move(lengths);
  return p;
}

SequencePartition even_partition(const ModelSpec& model, std::int64_t seq, int segments) {
  return partition_from_lengths(model, even_lengths(seq, segments));
}

SequencePartition flops_partition(const ModelSpec& model, std::int64_t seq, int segments,
                                  std::int64_t multiple) {
  if (segments < 1) throw Error("sequence partition: expected at least 1 segment, got " + std::to_string(segments));
  if (multiple < 1) throw Error("sequence partition: expected a rounding multiple >= 1, got " + std::to_string(multiple));
  if (seq < std::int64_t{segments} * multiple) {
    throw Error("sequence partition: a sequence of " + std::to_string(seq) +
                " tokens cannot be cut into " + std::to_string(segments) + " segments of at least " +
                std::to_string(multiple) + " token(s)");
  }
  // FLOPs(s, e) = alpha*s + beta*(s*e - s^2/2) with alpha the linear terms per token and beta the
  // attention term per query-key pair (seq1f1b.md). Setting it to the target gives
  // (beta/2) s^2 - (alpha + beta e) s + target = 0; the smaller root is the segment length.
  // The target of segment i is an equal share of what is left, FLOPs(prefix [0, e)) / (i + 1):
  // T/k when nothing is rounded, and when lengths are rounded to a multiple the error is spread
  // over the remaining segments instead of piling onto the first (thunlp/Seq1F1B rounds down and
  // gives the whole remainder to the first segment).
  const double alpha = model.vocab_flops(1) + model.layers * model.layer_linear_flops(1);
  const double beta = model.layers * (4.0 * model.head_dim() + 3.0) * model.heads;
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(segments), 0);
  std::int64_t end = seq;
  for (int i = segments - 1; i >= 1; --i) {
    const double target = model.segment_forward_flops(0, end) / (i + 1);
    const double b = alpha + beta * static_cast<double>(end);
    const double disc = std::max(0.0, b * b - 2.0 * beta * target);
    const double exact = 2.0 * target / (b + std::sqrt(disc));  // stable form of the small root
    std::int64_t len = std::llround(exact / static_cast<double>(multiple)) * multiple;
    // Leave at least `multiple` tokens for each earlier segment.
    len = std::clamp<std::int64_t>(len, multiple, end - std::int64_t{i} * multiple);
    lengths[static_cast<std::size_t>(i)] = len;
    end -= len;
  }
  lengths[0] = end;
  SequencePartition p = partition_from_lengths(model, std::move(lengths));
  p.split = SplitMethod::flops;
  return p;
}

SequencePartition cut_sequence(const ModelSpec& model, std::int64_t seq, const SegmentRequest& r) {
  if (r.explicit_lengths()) {
    std::int64_t sum = 0;
    for (std::int64_t len : r.lengths) sum += len;
    if (sum != seq) {
      throw Error("sequence partition: segment lengths sum to " + std::to_string(sum) +
                  ", expected the sequence length " + std::to_string(seq));
    }
    return partition_from_lengths(model, r.lengths);
  }
  if (r.split == SplitMethod::flops && r.count > 1) return flops_partition(model, seq, r.count, r.multiple);
  if (r.multiple > 1) {
    throw Error("sequence partition: a rounding multiple applies to the flops split");
  }
  return even_partition(model, seq, r.count);
}

}  // namespace plait::spec
