#pragma once
// Cutting a sequence of S tokens into k contiguous segments (Seq1F1B, arXiv 2406.03488 and
// thunlp/Seq1F1B split_solver.py), and the forward FLOPs each segment costs.
//
// Forward FLOPs of segment i (length s, ending at e = start + s) for one sample, from
// ../shared/reference/seq1f1b.md:
//   FLOPs_i = 4*s*H*V + L*[ 8*s*H*(n_h*d) + 4*s*H*F + (4d+3)*n_h*(s*e - s^2/2) ]
// 4sHV: embedding + LM head; 8sH(n_h d): QKV and output projections; 4sHF: MLP; last term: QK^T,
// PV and softmax over the causal query-key pairs of the segment (queries attend to the prefix).
#include <cstdint>
#include <string_view>
#include <vector>

#include "plait/schedule/model_shape.h"

namespace plait::schedule {

// The per-layer linear part 8*s*H*(n_h*d) + 4*s*H*F.
double layer_linear_flops(const ModelShape& shape, std::int64_t length);
// The per-layer attention part (4d+3)*n_h*(s*e - s^2/2), e = start + length.
double layer_attention_flops(const ModelShape& shape, std::int64_t start, std::int64_t length);
// The vocabulary part 4*s*H*V (embedding + LM head).
double vocab_flops(const ModelShape& shape, std::int64_t length);
// FLOPs_i above: the whole model's forward over one segment of one sample.
double segment_forward_flops(const ModelShape& shape, std::int64_t start, std::int64_t length);

enum class SplitMethod { even, flops };

// Parses "even" | "flops"; throws plait::Error otherwise.
SplitMethod parse_split_method(std::string_view text);
std::string_view split_method_name(SplitMethod method);

struct SequencePartition {
  std::vector<std::int64_t> lengths;  // s_0 .. s_{k-1}, summing to S
  std::vector<double> flops;          // FLOPs_i per sample
  std::int64_t start(int segment) const;
  // max FLOPs / min FLOPs - 1: how unequal the segments are.
  double flops_imbalance() const;
};

// Lengths as equal as integers allow, the remainder S % k on the first segment (core's
// even_segment_lengths, which the runtime cuts with).
SequencePartition even_partition(const ModelShape& shape, std::int64_t seq, int segments);

// Equal forward FLOPs per segment: solve FLOPs_i = T/k walking back from e_{k-1} = S (one
// quadratic per segment, as thunlp/Seq1F1B's split solver does), rounding each length to the
// nearest multiple of `multiple` and re-solving the rest for equal shares of what is left; the
// first segment takes what remains. The first segment comes out longest.
SequencePartition flops_partition(const ModelShape& shape, std::int64_t seq, int segments,
                                  std::int64_t multiple = 1);

SequencePartition partition_sequence(const ModelShape& shape, std::int64_t seq, int segments,
                                     SplitMethod method, std::int64_t multiple = 1);

}  // namespace plait::schedule
