#pragma once
// The bf16 GEMMs' fallback where oneDNN has no native bf16 (onednn_context.h, "Path"): the same
// matmul as OneDnnContext::execute (Bf16MatmulShape), computed by widening the bf16 operands to
// fp32 — exact, every bf16 is an fp32 — and multiplying with OpenBLAS's sgemm (blas.h). So the
// products and their fp32 accumulation are sgemm's, and a bf16 dst is rounded once at the end as
// on the oneDNN path: the two differ only in the order of the fp32 additions.
//
// Bounded panels keep the fp32 copies small: dst is computed in tiles of at most
// kWidenedTileRows x kWidenedTileCols, each summed over the reduction in chunks of
// kWidenedTileDepth, with an fp32 tile of A, one of B and (bf16 dst) an fp32 accumulator — at
// most 12 MiB, in the context's tracked workspace. Each operand tile is widened once per tile of
// the other operand: (1/rows + 1/cols)/2 widened elements per flop, ~0.1% of the work.
// bias, residual and (accumulate) dst's old value start the fp32 accumulator.
#include "plait/kernels/onednn_context.h"

namespace plait::kernels {

inline constexpr int kWidenedTileRows = 1024;
inline constexpr int kWidenedTileCols = 1024;
inline constexpr int kWidenedTileDepth = 1024;

void widened_sgemm(OneDnnContext& context, const Bf16MatmulShape& shape, const Bf16MatmulArgs& args);

}  // namespace plait::kernels
