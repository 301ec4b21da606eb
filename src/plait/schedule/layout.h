#pragma once
// What a schedule assumes about where the model lives: which virtual stages (model chunks)
// each rank holds, and how many virtual stages, micro-batches and sequence segments there are.
//
// The layout is general on purpose: several ranks may hold the same virtual stage (data
// parallelism, Zorse-style heterogeneous stages), each then running a different subset of the
// micro-batches. Which rank runs a given unit is therefore never computed from a formula; it is
// looked up in the action lists (UnitIndex).
#include <cstdint>
#include <vector>

namespace plait::schedule {

struct Layout {
  // rank_vstages[r][c]: the virtual stage held as chunk c by rank r.
  std::vector<std::vector<std::int32_t>> rank_vstages;
  std::int32_t num_vstages = 0;
  std::int32_t num_microbatches = 0;
  std::int32_t num_segments = 1;

  int num_ranks() const { return static_cast<int>(rank_vstages.size()); }
  int num_chunks(int rank) const { return static_cast<int>(rank_vstages[rank].size()); }
  // The largest number of chunks any rank holds (the "v" of the text form).
  int max_chunks() const;
  std::int32_t vstage(int rank, int chunk) const { return rank_vstages[rank][chunk]; }
  // Units per kind: num_microbatches * num_segments * num_vstages.
  std::int64_t num_units() const {
    return std::int64_t{num_microbatches} * num_segments * num_vstages;
  }

  friend bool operator==(const Layout&, const Layout&) = default;
};

// Megatron's interleaved placement (Narayanan et al., arXiv 2104.04473, sec. 2.2): p ranks,
// v chunks each; chunk c of rank r is virtual stage c*p + r. v = 1 is the plain pipeline.
Layout interleaved_layout(int ranks, int chunks, int microbatches, int segments);

// The V placement of ZB-V (Qi et al., arXiv 2401.10241, sec. 6): chunk 0 of rank r is virtual
// stage r and chunk 1 is 2p-1-r, so rank 0 holds both the first and the last stage.
Layout v_shape_layout(int ranks, int microbatches, int segments);

// Where a schedule family puts the virtual stages of its chunks on p pipeline positions (ranks,
// or groups of ranks in a heterogeneous pipeline). The one place these formulas live.
enum class StagePlacement : std::uint8_t {
  contiguous,   // one chunk per position: position r holds virtual stage r
  interleaved,  // chunk c of position r is virtual stage c*p + r (Megatron, arXiv 2104.04473 sec. 2.2)
  v_shape,      // chunk 0 of position r is virtual stage r, chunk 1 is 2p-1-r (ZB-V, arXiv 2401.10241 sec. 6)
};

// "contiguous", "interleaved", "v-shape".
const char* placement_name(StagePlacement placement);

// The virtual stage that chunk `chunk` of pipeline position `position` (of `positions`) holds.
std::int32_t placed_vstage(StagePlacement placement, int positions, int position, int chunk);

// The pipeline position holding virtual stage `vstage` (the inverse of placed_vstage).
int placed_position(StagePlacement placement, int positions, std::int32_t vstage);

// One rank per position: interleaved_layout or v_shape_layout (chunks must be 2 for v_shape, 1
// for contiguous).
Layout placed_layout(StagePlacement placement, int ranks, int chunks, int microbatches, int segments);

// Whether `layout` is interleaved_layout(ranks, max_chunks, ...) (the text form's default).
bool is_interleaved_layout(const Layout& layout);

// Throws plait::Error if the layout is inconsistent: no ranks, a rank without chunks, a virtual
// stage out of range, one rank holding a stage twice, a stage no rank holds, m or k < 1.
void check_layout(const Layout& layout);

}  // namespace plait::schedule
