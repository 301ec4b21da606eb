#pragma once
// The one sequence partition: a sequence of S tokens cut into k contiguous segments (Seq1F1B,
// arXiv 2406.03488; ../shared/reference/seq1f1b.md), with each segment's start, length and
// forward FLOPs. It is cut once, from the model and the request a config or the command line
// makes (train.segments: a count or the lengths; parallel.split: even or flops), and carried as
// this value by the pipeline plan to the executor, the simulator and the traces.
#include <cstdint>
#include <string_view>
#include <vector>

#include "plait/core/json_fields.h"
#include "plait/spec/model_spec.h"

namespace plait::spec {

// A unit's piece of its micro-batch's sequence: absolute positions [start, start + length).
struct Segment {
  int index = 0;
  int start = 0;
  int length = 0;
  int end() const { return start + length; }
  bool operator==(const Segment&) const = default;
};

enum class SplitMethod { even, flops };

// Parses "even" | "flops"; throws plait::Error otherwise.
SplitMethod parse_split_method(std::string_view text);
std::string_view split_method_name(SplitMethod method);

// What the user asked for: k segments (cut by `split`, lengths rounded to `multiple`) or the
// lengths themselves (then split and multiple do not apply).
struct SegmentRequest {
  int count = 1;
  std::vector<std::int64_t> lengths;  // non-empty: explicit lengths
  SplitMethod split = SplitMethod::even;
  std::int64_t multiple = 1;
  bool explicit_lengths() const { return !lengths.empty(); }
  int segments() const { return explicit_lengths() ? static_cast<int>(lengths.size()) : count; }
  bool operator==(const SegmentRequest&) const = default;
};

// train.segments of a train section for sequences of `seq` tokens: an integer k in [1, seq] or
// an array of lengths >= 1 summing to seq; absent, one segment. Errors are InputErrors naming
// the field ("cfg.json: train.segments: segment lengths sum to 10, expected train.seq 12").
// The split method is not part of the train section (parallel.split sets it).
SegmentRequest read_segment_request(const JsonFields& train, std::int64_t seq);

struct SequencePartition {
  std::vector<std::int64_t> lengths;  // s_0 .. s_{k-1}, summing to S
  std::vector<std::int64_t> starts;   // start_i = s_0 + ... + s_{i-1}
  std::vector<double> flops;          // forward FLOPs of segment i per sample (model_spec.h)
  SplitMethod split = SplitMethod::even;  // how it was cut (explicit lengths: even)

  int count() const { return static_cast<int>(lengths.size()); }
  std::int64_t seq() const { return starts.empty() ? 0 : starts.back() + lengths.back(); }
  std::int64_t start(int segment) const { return starts[static_cast<std::size_t>(segment)]; }
  // Segment i as the engine takes it (positions fit an int: the engine's max_seq is bounded).
  Segment segment(int i) const;
  // max FLOPs / min FLOPs - 1: how unequal the segments are.
  double flops_imbalance() const;
  bool operator==(const SequencePartition&) const = default;
};

// k lengths as equal as integers allow, the remainder seq % k on the FIRST segment, as in the
// Seq1F1B reference (thunlp/Seq1F1B split_solver.py), so earlier segments are never shorter
// than later ones. Throws plait::Error unless 1 <= k <= seq.
std::vector<std::int64_t> even_lengths(std::int64_t seq, int k);

// The partition of explicit lengths (each >= 1); throws plait::Error naming the problem.
SequencePartition partition_from_lengths(const ModelSpec& model, std::vector<std::int64_t> lengths);

// even_lengths cut.
SequencePartition even_partition(const ModelSpec& model, std::int64_t seq, int segments);

// Equal forward FLOPs per segment: solve FLOPs_i = T/k walking back from e_{k-1} = S (one
// quadratic per segment, as thunlp/Seq1F1B's split solver does), rounding each length to the
// nearest multiple of `multiple` and re-solving the rest for equal shares of what is left; the
// first segment takes what remains. The first segment comes out longest.
SequencePartition flops_partition(const ModelSpec& model, std::int64_t seq, int segments,
                                  std::int64_t multiple = 1);

// The request cut for `model` and sequences of `seq` tokens: the one place a partition is made.
SequencePartition cut_sequence(const ModelSpec& model, std::int64_t seq,
                               const SegmentRequest& request);

}  // namespace plait::spec
