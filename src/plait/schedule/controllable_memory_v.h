#pragma once
// The controllable-memory V schedules (Qi et al., "Pipeline Parallelism with Controllable
// Memory", NeurIPS 2024, arXiv 2405.15362): the V placement of ZB-V (chunk 0 of rank r is
// virtual stage r, chunk 1 is 2p-1-r), backward split into B and W, and the activations a rank
// holds set by the lifespan of a repeated building block. The paper's peak activation memory in
// micro-batches (a V chunk unit weighs half of one) and bubble with F = B = W:
//   V-Min  (p+4)//3   about 2p/(3m)
//   V-Half (p+2)//2   about p/(2m)
//   V-ZB   p          about 0
// The paper's bubble rate is 1 - m(F+B+W) / (the longest time from a rank's first action to its
// last); plait's simulator reports idle time over ranks x step (docs/schedules.md gives both).
//
// The building block of micro-batch j is four slots per rank r, each one unit (a chunk's F or B):
// F chunk 0 at o0(r) + 6j, F chunk 1 at o1(r) + 6j, B chunk 1 at o2(r) + 6j, B chunk 0 at
// o3(r) + 6j; the offsets are distinct mod 6, so blocks repeat every 6 slots and the two slots
// left per period take the W's, each in the first free slot after its B, oldest first (the
// authors' put_w). A rank runs its actions in slot order; the simulator's eager execution is the
// paper's "squeeze". (The authors also reorder the warm-up and cool-down greedily under the
// memory bound; plait does not, so its ends are the plain block's.)
//
// Sequence-level form: the blocks run (micro-batch, segment) units, forwards in Seq1F1B's order
// (segments ascending) in block u = j*k + s, and backwards with segments descending k - 1 blocks
// later (block u + k - 1 runs the backward of unit j*k + (k-1-s)), so a micro-batch's last
// segment is forwarded before its backward starts; the lifespan grows by k - 1 blocks.
#include <array>

#include "plait/schedule/schedule_family.h"

namespace plait::schedule {

// The four slot offsets {F chunk 0, F chunk 1, B chunk 1, B chunk 0} of rank `rank` of `ranks`.
using BlockOffsets = std::array<int, 4> (*)(int ranks, int rank);

// The repeated building block's order (throws plait::Error if two offsets coincide mod 6).
Schedule repeated_v_block(const PipelineShape& shape, BlockOffsets offsets);

// Units rank `rank` of repeated_v_block(shape, offsets) holds at most: before their B
// (before_w = false) or before their W (true).
int repeated_v_block_peak(const PipelineShape& shape, BlockOffsets offsets, int rank, bool before_w);

// For real unit costs: plait's list scheduler on the V, each rank under the block's own peak of
// units before their W, each micro-batch started only when all its units fit
// (ListSchedulerOptions::reserve_whole_microbatches), so the block's memory is kept.
Schedule repeated_v_block_for_costs(const PipelineShape& shape, BlockOffsets offsets, const UnitCosts& costs);

// V-ZB, which is ZB-V (zb_v.cpp; the generator of zb-v and v-zb): a cap of 1F1B's p micro-batches,
// 2(p + k - 1) units with k segments (Seq1F1B's p + k - 1 per chunk), each micro-batch reserved
// whole only when built for real costs (the F = B = W order is ZB-V's as plait has always run it).
int zero_bubble_v_in_flight(const PipelineShape& shape, int rank);
Schedule zero_bubble_v_for_costs(const PipelineShape& shape, const UnitCosts& costs);
Schedule zero_bubble_v(const PipelineShape& shape);

}  // namespace plait::schedule
