#pragma once
// The tiles of the CPU attention kernel (kernels/attention.cpp, FlashAttention-2's algorithm:
// Dao 2023, arXiv 2307.08691) and the scratch they need, as the model description's memory
// formulas: the engine allocates the backward's workspace by them, and spec::unit_memory (hence
// the simulator and the planner) counts the same bytes.
//
// A query tile of kAttentionQueryTile rows meets the keys it sees in key tiles of at most
// kAttentionKeyTile keys (a key tile never straddles two K/V blocks). The tiles are counted in
// the accumulation type (fp32 for the fp32 and bf16 engines, fp64 in the tests' reference), with
// rows of head-dimension width padded to a multiple of kAttentionTilePad elements, so its tile
// products load whole vectors of the widest SIMD unit (16 fp32 lanes). The bf16 kernel's
// vdpbf16ps path (kernels/attention_dpbf16.h) keeps some tiles as bf16 pairs instead, within the
// same backward workspace.
// None of it grows with the sequence: what attention keeps from the forward to the backward is
// one log-sum-exp per query row and head (B·H·s values), not the (s, e) probabilities.
#include <cstddef>

namespace plait::spec {

inline constexpr int kAttentionQueryTile = 64;
inline constexpr int kAttentionKeyTile = 64;
inline constexpr int kAttentionTilePad = 16;
static_assert(kAttentionQueryTile % kAttentionTilePad == 0 &&
              kAttentionKeyTile % kAttentionTilePad == 0);

// The head dimension rounded up to the tile padding (the width of a padded tile row).
constexpr int attention_padded_head_dim(int head_dim) {
  return (head_dim + kAttentionTilePad - 1) / kAttentionTilePad * kAttentionTilePad;
}

// Elements of one thread's forward scratch (Bq = query tile, Bk = key tile, d the head
// dimension, dp padded): the scaled query tile transposed (d·Bq), the output accumulator
// (Bq·dp), a key tile's V rows (Bk·dp), its scores/probabilities transposed (Bk·Bq), and four
// values per query (4·Bq: running maximum and sum, the tile's maximum, the rescaling). The
// forward allocates it per call on each thread, outside the memory tracker (like a stack
// frame: 65 KiB at d = 64, whatever s; the vdpbf16ps path's q^T, V and P as bf16 pairs in place
// of the first and third terms, 57 KiB at d = 64).
constexpr std::size_t attention_forward_tile_elements(int head_dim) {
  const std::size_t q = kAttentionQueryTile, k = kAttentionKeyTile, d = head_dim,
                    dp = attention_padded_head_dim(head_dim);
  return d * q + q * dp + k * dp + k * q + 4 * q;
}

// Elements of one thread's backward scratch: the scaled query tile and dout transposed (d·Bq
// each) and as rows, with the dq accumulator (Bq·dp each), a key tile's K rows (Bk·dp), P^T and
// dS^T (Bk·Bq each), and D = rowsum(dout ∘ out) and the log-sum-exp of the tile's queries
// (2·Bq).
constexpr std::size_t attention_backward_tile_elements(int head_dim) {
  const std::size_t q = kAttentionQueryTile, k = kAttentionKeyTile, d = head_dim,
                    dp = attention_padded_head_dim(head_dim);
  return 2 * d * q + 3 * q * dp + k * dp + 2 * k * q + 2 * q;
}

// The backward's workspace with `threads` OpenMP threads (one slice each), in elements of the
// accumulation type (4 bytes in both engines).
constexpr std::size_t attention_workspace_elements(int head_dim, int threads) {
  return static_cast<std::size_t>(threads) * attention_backward_tile_elements(head_dim);
}

}  // namespace plait::spec
