#include "plait/runtime/reshard.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"

namespace plait::runtime {

std::vector<ReshardPiece> reshard_pieces(std::int64_t elements, int degree, int rank, int peer_degree) {
  if (degree < 1 || peer_degree < 1 || rank < 0 || rank >= degree || elements % degree != 0 ||
      elements % peer_degree != 0) {
    throw Error("reshard: " + std::to_string(elements) + " elements cannot be cut into blocks of degree " +
                std::to_string(degree) + " (rank " + std::to_string(rank) + ") and " + std::to_string(peer_degree));
  }
  const std::int64_t block = elements / degree, peer_block = elements / peer_degree;
  const std::int64_t begin = rank * block, end = begin + block;
  std::vector<ReshardPiece> pieces;
  // The peers whose blocks meet [begin, end): from the one holding `begin` to the one holding end - 1.
  for (auto j = static_cast<int>(begin / peer_block); j < peer_degree && j * peer_block < end; ++j) {
    const std::int64_t lo = std::max(begin, j * peer_block), hi = std::min(end, (j + 1) * peer_block);
    if (lo < hi) pieces.push_back({j, lo - begin, lo - j * peer_block, hi - lo});
  }
  return pieces;
}

}  // namespace plait::runtime
