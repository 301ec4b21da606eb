#pragma once
// The boundary message between two pipeline stages of different tensor-parallel degrees.
//
// Under sequence parallelism (model/tensor_parallel.h) a stage's input and output on TP rank i of
// a group of t are the i-th of t contiguous blocks of the unit's N = batch x s rows (row-major
// [batch, s, hidden] flattened, so with batch > 1 a block may span rows of several sequences;
// each is still one contiguous range). A message between a stage of degree t and the next of
// degree t' (activations forward, their gradients backward over the same boundary) is therefore
// re-cut: the sender's block [i N/t, (i+1) N/t) meets the receiver's [j N/t', (j+1) N/t') in one
// contiguous range or none, and each non-empty meeting is one piece, sent from that offset of
// the sender's buffer straight into that offset of the receiver's (no packing). When one degree
// divides the other (the plan requires it), every piece is N/max(t, t') rows: a sender of the
// larger degree sends its whole block to one receiver, a sender of the smaller degree sends
// t'/t pieces, one to each receiver. Equal degrees give one piece, rank i to rank i, the
// whole block (the path without resharding).
#include <cstdint>
#include <vector>

namespace plait::runtime {

struct ReshardPiece {
  int peer = 0;             // the other side's TP rank
  std::int64_t offset = 0;  // elements, into this side's block
  std::int64_t peer_offset = 0;  // elements, into the peer's block
  std::int64_t count = 0;   // elements
};

// The pieces of TP rank `rank` of a group of `degree` for a tensor of `elements` elements cut
// into `degree` equal blocks, against a group of `peer_degree` holding the same tensor cut into
// `peer_degree` blocks; in the peers' order. Both degrees must divide `elements`.
std::vector<ReshardPiece> reshard_pieces(std::int64_t elements, int degree, int rank, int peer_degree);

}  // namespace plait::runtime
