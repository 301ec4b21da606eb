#include "plait/schedule/sequence_partition.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "plait/core/error.h"
#include "plait/core/segment_lengths.h"

namespace plait::schedule {

double layer_linear_flops(const ModelShape& shape, std::int64_t length) {
  const double s = static_cast<double>(length), H = shape.hidden;
  const double attention_width = static_cast<double>(shape.heads) * shape.head_size();
  return 8.0 * s * H * attention_width + 4.0 * s * H * shape.ffn_hidden();
}

double layer_attention_flops(const ModelShape& shape, std::int64_t start, std::int64_t length) {
  const double s = static_cast<double>(length);
  const double e = static_cast<double>(start + length);
  const double d = shape.head_size();
  return (4.0 * d + 3.0) * shape.heads * (s * e - s * s / 2.0);
}

double vocab_flops(const ModelShape& shape, std::int64_t length) {
  return 4.0 * static_cast<double>(length) * shape.hidden * static_cast<double>(shape.vocab);
}

double segment_forward_flops(const ModelShape& shape, std::int64_t start, std::int64_t length) {
  return vocab_flops(shape, length) +
         shape.layers * (layer_linear_flops(shape, length) +
                         layer_attention_flops(shape, start, length));
}

SplitMethod parse_split_method(std::string_view text) {
  if (text == "even") return SplitMethod::even;
  if (text == "flops") return SplitMethod::flops;
  throw Error("unknown split method '" + std::string(text) + "'; expected even or flops");
}

std::string_view split_method_name(SplitMethod method) {
  return method == SplitMethod::even ? "even" : "flops";
}

std::int64_t SequencePartition::start(int segment) const {
  std::int64_t s = 0;
  for (int i = 0; i < segment; ++i) s += lengths[i];
  return s;
}

double SequencePartition::flops_imbalance() const {
  const auto [lo, hi] = std::minmax_element(flops.begin(), flops.end());
  return *hi / *lo - 1.0;
}

namespace {

void check_request(std::int64_t seq, int segments, std::int64_t multiple) {
  if (segments < 1) throw Error("sequence partition: expected at least 1 segment, got " + std::to_string(segments));
  if (multiple < 1) throw Error("sequence partition: expected a rounding multiple >= 1, got " + std::to_string(multiple));
  if (seq < std::int64_t{segments} * multiple) {
    throw Error("sequence partition: a sequence of " + std::to_string(seq) +
                " tokens cannot be cut into " + std::to_string(segments) + " segments of at least " +
                std::to_string(multiple) + " token(s)");
  }
}

void fill_flops(const ModelShape& shape, SequencePartition& p) {
  p.flops.clear();
  std::int64_t start = 0;
  for (std::int64_t len : p.lengths) {
    p.flops.push_back(segment_forward_flops(shape, start, len));
    start += len;
  }
}

}  // namespace

SequencePartition even_partition(const ModelShape& shape, std::int64_t seq, int segments) {
  check_request(seq, segments, 1);
  SequencePartition p;
  // The runtime's cut (core's even_segment_lengths: remainder on the first segment, as the
  // Seq1F1B reference), so predictions describe the lengths `plait train` runs.
  if (seq > INT_MAX) throw Error("sequence partition: a sequence of " + std::to_string(seq) + " tokens is too long");
  for (int len : even_segment_lengths(static_cast<int>(seq), segments)) p.lengths.push_back(len);
  fill_flops(shape, p);
  return p;
}

SequencePartition flops_partition(const ModelShape& shape, std::int64_t seq, int segments,
                                  std::int64_t multiple) {
  check_request(seq, segments, multiple);
  // FLOPs(s, e) = alpha*s + beta*(s*e - s^2/2) with alpha the linear terms per token and beta the
  // attention term per query-key pair (seq1f1b.md). Setting it to the target gives
  // (beta/2) s^2 - (alpha + beta e) s + target = 0; the smaller root is the segment length.
  // The target of segment i is an equal share of what is left, FLOPs(prefix [0, e)) / (i + 1):
  // T/k when nothing is rounded, and when lengths are rounded to a multiple the error is spread
  // over the remaining segments instead of piling onto the first (thunlp/Seq1F1B rounds down and
  // gives the whole remainder to the first segment).
  const double alpha = vocab_flops(shape, 1) + shape.layers * layer_linear_flops(shape, 1);
  const double beta = shape.layers * (4.0 * shape.head_size() + 3.0) * shape.heads;
  SequencePartition p;
  p.lengths.assign(segments, 0);
  std::int64_t end = seq;
  for (int i = segments - 1; i >= 1; --i) {
    const double target = segment_forward_flops(shape, 0, end) / (i + 1);
    const double b = alpha + beta * static_cast<double>(end);
    const double disc = std::max(0.0, b * b - 2.0 * beta * target);
    const double exact = 2.0 * target / (b + std::sqrt(disc));  // stable form of the small root
    std::int64_t len = std::llround(exact / static_cast<double>(multiple)) * multiple;
    // Leave at least `multiple` tokens for each earlier segment.
    len = std::clamp<std::int64_t>(len, multiple, end - std::int64_t{i} * multiple);
    p.lengths[i] = len;
    end -= len;
  }
  p.lengths[0] = end;
  fill_flops(shape, p);
  return p;
}

SequencePartition partition_sequence(const ModelShape& shape, std::int64_t seq, int segments,
                                     SplitMethod method, std::int64_t multiple) {
  return method == SplitMethod::even ? even_partition(shape, seq, segments)
                                     : flops_partition(shape, seq, segments, multiple);
}

}  // namespace plait::schedule
